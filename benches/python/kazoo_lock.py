"""kazoo's `Lock` on a ZooKeeper, measured the way zk_figures measures `redis-lease`'s ZooKeeper lock:

- uncontended: one thread, one client, one `Lock` object reused, acquire + release pairs for
  SECONDS (a reused `Lock` looks for its node by `get_children` before each create after its
  first: four requests a pair);
- contended8: 8 threads sharing one `KazooClient`, each with its own `Lock` on one path (kazoo's
  `Lock` is not meant to be shared between threads), an empty critical section, for SECONDS;
- handoff-processes: a holder keeps the lock 10 ms, stamps `time.time()` just before its release;
  the waiter, another process with its own `KazooClient` already waiting in `acquire()`, stamps
  when it holds the lock; ROUNDS rounds.

Run by `cargo run --release -p benches --bin zk_figures`; by hand:
    python3 benches/python/kazoo_lock.py 127.0.0.1:2181 500 5 [uncontended] [contended] [handoff]
(all three figures when none is named). Prints one line per figure:
    uncontended <pairs/s> <requests per pair> <writes per pair> <CPU µs per pair> <server ms per pair> <fsync ms per pair>
    contended8 <sections/s> <min per thread> <max per thread> <hand-offs> <sections> <requests per section> <CPU µs per section>
    handoff-processes <p50 ms> <p99 ms> <max ms>
Requests, writes and the server's time (answering requests; in fsync) are the server's own counts
(its `mntr` command) over the measured window, from all its clients; CPU is this process's (all
its threads).
"""

import multiprocessing
import os
import socket
import sys
import threading
import time

from kazoo.client import KazooClient

THREADS = 8
HOLD = 0.010
ROOT = "/kazoo-bench"


def percentiles(samples):
    samples = sorted(samples)
    at = lambda q: samples[int((len(samples) - 1) * q)]
    return at(0.5), at(0.99), samples[-1]


def four_letters(hosts, word):
    """The server's answer to a four-letter command."""
    host, port = hosts.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(word)
        reply = b""
        while chunk := conn.recv(4096):
            reply += chunk
    return reply.decode()


def server_counts(hosts):
    """What the server counted, from all its clients: requests received, writes, and the
    milliseconds it spent answering writes and reads and in fsync. From `mntr`; where only `srvr`
    is allowed (ZooKeeper's default), the times are NaN and writes are counted by the zxid."""
    mntr = four_letters(hosts, b"mntr")
    if "not in the whitelist" not in mntr:
        fields = dict(line.split("\t", 1) for line in mntr.splitlines() if "\t" in line)
        number = lambda name: float(fields[name])
        return {
            "received": number("zk_packets_received"),
            "writes": number("zk_cnt_updatelatency"),
            "server_ms": number("zk_sum_updatelatency") + number("zk_sum_readlatency"),
            "fsync_ms": number("zk_sum_fsynctime"),
        }
    srvr = four_letters(hosts, b"srvr")
    fields = dict(line.split(": ", 1) for line in srvr.splitlines() if ": " in line)
    return {
        "received": float(fields["Received"]),
        "writes": float(int(fields["Zxid"], 16)),
        "server_ms": float("nan"),
        "fsync_ms": float("nan"),
    }


def since(later, earlier):
    return {name: later[name] - earlier[name] for name in later}


def connect(hosts):
    client = KazooClient(hosts=hosts)
    client.start(timeout=15)
    return client


def uncontended(hosts, seconds):
    client = connect(hosts)
    lock = client.Lock(ROOT + "/uncontended")
    warm_until = time.monotonic() + min(seconds / 10, 0.5)
    while time.monotonic() < warm_until:
        lock.acquire()
        lock.release()
    counts = server_counts(hosts)
    cpu = time.process_time()
    pairs = 0
    began = time.monotonic()
    deadline = began + seconds
    while time.monotonic() < deadline:
        lock.acquire()
        lock.release()
        pairs += 1
    elapsed = time.monotonic() - began
    cpu = time.process_time() - cpu
    counts = since(server_counts(hosts), counts)
    client.stop()
    client.close()
    return (
        pairs / elapsed,
        counts["received"] / pairs,
        counts["writes"] / pairs,
        cpu / pairs * 1e6,
        counts["server_ms"] / pairs,
        counts["fsync_ms"] / pairs,
    )


def contended(hosts, seconds):
    client = connect(hosts)
    path = ROOT + "/contended"
    client.ensure_path(path)
    order = []
    stop = threading.Event()
    start = threading.Barrier(THREADS + 1)

    def worker(ident):
        lock = client.Lock(path)
        start.wait()
        while not stop.is_set():
            lock.acquire()
            order.append(ident)
            lock.release()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    counts = server_counts(hosts)
    start.wait()
    began = time.monotonic()
    cpu = time.process_time()
    time.sleep(seconds)
    stop.set()
    counted = len(order)
    elapsed = time.monotonic() - began
    cpu = time.process_time() - cpu
    counts = since(server_counts(hosts), counts)
    for thread in threads:
        thread.join()
    client.stop()
    client.close()
    order = order[:counted]
    per_thread = [0] * THREADS
    for ident in order:
        per_thread[ident] += 1
    handoffs = sum(1 for a, b in zip(order, order[1:]) if a != b)
    sections = max(counted, 1)
    requests = counts["received"] / sections
    return (
        counted / elapsed,
        min(per_thread),
        max(per_thread),
        handoffs,
        counted,
        requests,
        cpu / sections * 1e6,
    )


def child(hosts, pipe):
    client = connect(hosts)
    lock = client.Lock(ROOT + "/handoff")
    pipe.send("ready")
    while pipe.recv() == "go":
        lock.acquire()
        pipe.send(time.time())
        lock.release()
    client.stop()
    client.close()


def across_processes(hosts, rounds):
    # The spawned waiter imports this file: no bytecode cache is left beside it.
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    context = multiprocessing.get_context("spawn")
    parent_end, child_end = context.Pipe()
    process = context.Process(target=child, args=(hosts, child_end), daemon=True)
    process.start()
    parent_end.recv()
    client = connect(hosts)
    lock = client.Lock(ROOT + "/handoff")
    samples = []
    for _ in range(rounds):
        # Blocks until the waiter of the previous round has released.
        lock.acquire()
        parent_end.send("go")
        time.sleep(HOLD)
        released = time.time()
        lock.release()
        samples.append((parent_end.recv() - released) * 1e3)
    parent_end.send("stop")
    process.join(timeout=5)
    client.stop()
    client.close()
    return percentiles(samples)


def main():
    hosts, rounds, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    figures = sys.argv[4:] or ["uncontended", "contended", "handoff"]
    if "uncontended" in figures:
        rate, requests, writes, cpu, server, fsync = uncontended(hosts, seconds)
        print(
            f"uncontended {rate:.1f} {requests:.2f} {writes:.2f} {cpu:.0f} {server:.3f} {fsync:.3f}",
            flush=True,
        )
    if "contended" in figures:
        rate, low, high, handoffs, sections, requests, cpu = contended(hosts, seconds)
        print(
            f"contended8 {rate:.1f} {low} {high} {handoffs} {sections} {requests:.2f} {cpu:.0f}",
            flush=True,
        )
    if "handoff" in figures:
        p50, p99, worst = across_processes(hosts, rounds)
        print(f"handoff-processes {p50:.3f} {p99:.3f} {worst:.3f}", flush=True)


if __name__ == "__main__":
    main()
