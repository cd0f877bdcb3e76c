"""Hand-off latency of python-redis-lock (waiting on BLPOP), measured like lock_figures measures
`lease`: a holder keeps the lock 10 ms, then releases; the latency runs from the start of the
release to the waiter holding the lock. In one process (two threads) and across two processes.

Run by `cargo run --release -p benches --bin lock_figures`; by hand:
    python3 benches/python/handoff.py redis://127.0.0.1:6379 500
Prints one line per case: `<where> <p50 ms> <p99 ms> <max ms>`.
"""

import multiprocessing
import sys
import threading
import time

import redis
import redis_lock

HOLD = 0.010


def percentiles(samples):
    samples = sorted(samples)
    at = lambda q: samples[int((len(samples) - 1) * q)]
    return at(0.5), at(0.99), samples[-1]


def in_process(url, rounds):
    conn = redis.Redis.from_url(url)
    go, acquired = threading.Event(), []
    done = threading.Semaphore(0)

    def waiter():
        own = redis.Redis.from_url(url)
        while True:
            go.wait()
            go.clear()
            lock = redis_lock.Lock(own, "handoff:python", expire=30)
            lock.acquire(blocking=True)
            acquired.append(time.monotonic())
            lock.release()
            done.release()

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    samples = []
    for _ in range(rounds):
        lock = redis_lock.Lock(conn, "handoff:python", expire=30)
        lock.acquire(blocking=True)
        go.set()
        time.sleep(HOLD)
        released = time.monotonic()
        lock.release()
        done.acquire()
        samples.append((acquired.pop() - released) * 1e3)
    return percentiles(samples)


def child(url, pipe):
    conn = redis.Redis.from_url(url)
    while pipe.recv() == "go":
        lock = redis_lock.Lock(conn, "handoff:python-processes", expire=30)
        lock.acquire(blocking=True)
        pipe.send(time.time())
        lock.release()


def across_processes(url, rounds):
    parent_end, child_end = multiprocessing.Pipe()
    process = multiprocessing.Process(target=child, args=(url, child_end), daemon=True)
    process.start()
    conn = redis.Redis.from_url(url)
    samples = []
    for _ in range(rounds):
        lock = redis_lock.Lock(conn, "handoff:python-processes", expire=30)
        lock.acquire(blocking=True)
        parent_end.send("go")
        time.sleep(HOLD)
        released = time.time()
        lock.release()
        samples.append((parent_end.recv() - released) * 1e3)
        # The child releases right after stamping; wait for that before the next round.
        while conn.exists("lock:handoff:python-processes"):
            time.sleep(0.0005)
    parent_end.send("stop")
    process.join(timeout=5)
    return percentiles(samples)


def main():
    url, rounds = sys.argv[1], int(sys.argv[2])
    for name, case in (("one-process", in_process), ("two-processes", across_processes)):
        p50, p99, worst = case(url, rounds)
        print(f"{name} {p50:.3f} {p99:.3f} {worst:.3f}", flush=True)


if __name__ == "__main__":
    main()
