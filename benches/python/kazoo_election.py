"""kazoo's `Election` on a ZooKeeper, measured the way election_figures measures `redis-lease`'s
election:

- resign: two candidates (a `KazooClient` each) take turns: the leader's function returns (its
  `Election.run` then deletes its node) while the other waits in `run`; from just before the
  return to the moment the other's function is called; and to the moment the slowest of 4
  observers (a `KazooClient` each, with a `ChildrenWatch` on the election's node: the lowest
  contender leads) has seen the new leader. ROUNDS rounds.
- death: a leader in a child process (this script run as `child HOSTS TIMEOUT`) is killed
  (SIGKILL) while this process waits in `run`: from the kill to the moment this process leads.
  DEATHS rounds. The session timeout is TIMEOUT seconds.

Run by `cargo run --release -p benches --bin election_figures`; by hand:
    python3 benches/python/kazoo_election.py 127.0.0.1:2181 200 20 0.5 [resign] [death]
Prints one line per figure, its samples in ms: `resign ...`, `observed ...`, `death ...`.
"""

import os
import queue
import signal
import subprocess
import sys
import threading
import time

from kazoo.client import KazooClient

PATH = "/kazoo-bench-election"
OBSERVERS = 4


def client(hosts, timeout):
    zk = KazooClient(hosts=hosts, timeout=timeout)
    zk.start()
    return zk


def sequence(node):
    return int(node[-10:])


def resign(hosts, rounds, timeout):
    candidates = [client(hosts, timeout) for _ in range(2)]
    seen = {}  # leader node -> the times observers first saw it lead
    seen_lock = threading.Lock()
    observers = [client(hosts, timeout) for _ in range(OBSERVERS)]
    for zk in observers:
        zk.ensure_path(PATH)
        last = [None]

        def watch(children, last=last):
            if children:
                leader = min(children, key=sequence)
                if leader != last[0]:
                    last[0] = leader
                    with seen_lock:
                        seen.setdefault(leader, []).append(time.time())
            return True

        zk.ChildrenWatch(PATH, watch)
    elected = queue.Queue()

    def candidate(i):
        election = candidates[i].Election(PATH, str(i))
        while True:
            done = threading.Event()

            def lead():
                node = election.lock.node
                elected.put((time.time(), done, node))
                done.wait()

            election.run(lead)

    for i in range(2):
        threading.Thread(target=candidate, args=(i,), daemon=True).start()
    _, done, _ = elected.get()
    to_leader, to_observers = [], []
    for _ in range(rounds):
        time.sleep(0.02)
        resigned_at = time.time()
        done.set()
        led_at, done, node = elected.get()
        to_leader.append((led_at - resigned_at) * 1e3)
        deadline = time.time() + 10
        while time.time() < deadline:
            with seen_lock:
                times = seen.get(node, [])
                if len(times) == OBSERVERS:
                    to_observers.append((max(times) - resigned_at) * 1e3)
                    break
            time.sleep(0.001)
    print("resign", " ".join(f"{s:.3f}" for s in to_leader))
    print("observed", " ".join(f"{s:.3f}" for s in to_observers))
    sys.stdout.flush()
    done.set()


def death(hosts, deaths, timeout):
    zk = client(hosts, timeout)
    samples = []
    for round in range(deaths):
        child = subprocess.Popen(
            [sys.executable, __file__, "child", hosts, str(timeout)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout.readline().strip() == "leading"
        led = queue.Queue()
        release = threading.Event()
        election = zk.Election(PATH + "-death", "parent")
        waiter = threading.Thread(
            target=election.run, args=(lambda: (led.put(time.time()), release.wait()),)
        )
        waiter.start()
        # As election_figures does: a moment that moves across the server's ticks.
        time.sleep((50 + (round * 37) % 100) / 1000)
        killed_at = time.time()
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        samples.append((led.get() - killed_at) * 1e3)
        release.set()
        waiter.join()
    print("death", " ".join(f"{s:.3f}" for s in samples))


def child(hosts, timeout):
    zk = client(hosts, timeout)
    election = zk.Election(PATH + "-death", "child")

    def lead():
        print("leading", flush=True)
        while True:
            time.sleep(1)

    election.run(lead)


def main():
    if sys.argv[1] == "child":
        child(sys.argv[2], float(sys.argv[3]))
        return
    hosts, rounds, deaths, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    figures = sys.argv[5:] or ["resign", "death"]
    if "resign" in figures:
        resign(hosts, rounds, timeout)
    if "death" in figures:
        death(hosts, deaths, timeout)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
