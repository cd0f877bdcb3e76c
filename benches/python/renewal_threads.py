"""Threads python-redis-lock runs for locks it renews (auto_renewal=True): one per lock. Holds N
locks with a 3 s lease in one process and counts the process's threads.

Run by `cargo run --release -p benches --bin watchdog_figures`; by hand:
    python3 benches/python/renewal_threads.py redis://127.0.0.1:6379 1000
Prints a Markdown table row per figure.
"""

import sys
import threading
import time

import redis
import redis_lock


def main(url, count):
    conn = redis.Redis.from_url(url)
    before = threading.active_count()
    locks = []
    for n in range(count):
        lock = redis_lock.Lock(conn, "python-held-%d" % n, expire=3, auto_renewal=True)
        lock.acquire(blocking=False)
        locks.append(lock)
    time.sleep(1.2)
    held = threading.active_count() - before
    for lock in locks:
        lock.release()
    print("| locks held | threads added |")
    print("|---|---|")
    print("| %d | %d |" % (count, held))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
