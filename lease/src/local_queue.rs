//! The local queue: per lock, one thread of this client contends in the store at a time; the
//! others wait here, in FIFO order, without sending anything to the store. Past `max_waiters`, a
//! caller is refused at once. Turns only: what the contender offers to releasers of this client
//! is the hand-off's (`lock/handoff.rs`).

use crate::cancel::Cancel;
use crate::sync::{Condvar, Mutex};
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Instant;

/// Why a turn was not given.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `max_waiters` threads wait already.
    Full { waiting: usize },
    /// The deadline passed while waiting (or had passed, and another thread has the turn).
    TimedOut,
    /// The wait's [`Cancel`] token was cancelled.
    Cancelled,
}

#[derive(Default)]
struct Ticket {
    ready: Mutex<bool>,
    given: Condvar,
}

#[derive(Default)]
struct Queue {
    busy: bool,
    waiting: VecDeque<Arc<Ticket>>,
}

/// The queues of a client's threads, one per key (what the client knows a primitive by).
pub(crate) struct LocalQueues<K> {
    queues: Mutex<HashMap<K, Queue>>,
    max_waiters: usize,
}

impl<K: Hash + Eq + Clone> LocalQueues<K> {
    pub(crate) fn new(max_waiters: usize) -> Self {
        LocalQueues {
            queues: Mutex::new(HashMap::new()),
            max_waiters,
        }
    }

    /// Waits for this thread's turn to contend for `name`, until `deadline` (`None`: no limit).
    pub(crate) fn enter(
        &self,
        name: &K,
        deadline: Option<Instant>,
        cancel: Option<&Cancel>,
    ) -> Result<Turn<'_, K>, Refused> {
        let ticket = {
            let mut queues = self.queues.lock();
            let queue = queues.entry(name.clone()).or_default();
            if !queue.busy {
                queue.busy = true;
                return Ok(self.turn(name));
            }
            if deadline.is_some_and(|deadline| deadline <= Instant::now()) {
                return Err(Refused::TimedOut);
            }
            if queue.waiting.len() >= self.max_waiters {
                return Err(Refused::Full {
                    waiting: queue.waiting.len(),
                });
            }
            let ticket = Arc::new(Ticket::default());
            queue.waiting.push_back(Arc::clone(&ticket));
            ticket
        };
        let _registration = cancel.map(|cancel| {
            let ticket = Arc::clone(&ticket);
            cancel.on_cancel(Arc::new(move || {
                let _ready = ticket.ready.lock();
                ticket.given.notify_all();
            }))
        });
        let cancelled = || cancel.is_some_and(Cancel::is_cancelled);
        let mut ready = ticket.ready.lock();
        while !*ready && !cancelled() {
            match deadline {
                Some(deadline) => {
                    if ticket.given.wait_until(&mut ready, deadline).timed_out() && !*ready {
                        break;
                    }
                }
                None => ticket.given.wait(&mut ready),
            }
        }
        if *ready {
            return Ok(self.turn(name));
        }
        drop(ready);
        // Timed out: leave the queue, unless the turn arrived meanwhile; then pass it on.
        let mut queues = self.queues.lock();
        let still_queued = queues.get_mut(name).is_some_and(|queue| {
            let before = queue.waiting.len();
            queue
                .waiting
                .retain(|waiting| !Arc::ptr_eq(waiting, &ticket));
            queue.waiting.len() < before
        });
        drop(queues);
        if !still_queued {
            drop(self.turn(name));
        }
        if cancelled() {
            return Err(Refused::Cancelled);
        }
        Err(Refused::TimedOut)
    }

    fn turn(&self, name: &K) -> Turn<'_, K> {
        Turn {
            queues: self,
            name: name.clone(),
        }
    }

    fn pass_on(&self, name: &K) {
        let mut queues = self.queues.lock();
        let Some(queue) = queues.get_mut(name) else {
            return;
        };
        match queue.waiting.pop_front() {
            Some(next) => {
                *next.ready.lock() = true;
                next.given.notify_one();
            }
            None => {
                queues.remove(name);
            }
        }
    }

    /// Threads waiting for `name` behind the current contender.
    #[cfg(test)]
    fn waiting(&self, name: &K) -> usize {
        self.queues
            .lock()
            .get(name)
            .map_or(0, |queue| queue.waiting.len())
    }
}

/// The right to contend for one lock in the store; passed to the next waiter on drop.
pub(crate) struct Turn<'a, K: Hash + Eq + Clone> {
    queues: &'a LocalQueues<K>,
    name: K,
}

impl<K: Hash + Eq + Clone> Drop for Turn<'_, K> {
    fn drop(&mut self) {
        self.queues.pass_on(&self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::thread;
    use std::time::Duration;

    #[test]
    fn turns_pass_in_fifo_order() {
        let queues = Arc::new(LocalQueues::new(10));
        let first = queues.enter(&"a", None, None).expect("free");
        let (done, order) = mpsc::channel();
        let mut threads = Vec::new();
        for n in 0..3 {
            let (shared, done) = (queues.clone(), done.clone());
            threads.push(thread::spawn(move || {
                let turn = shared.enter(&"a", None, None).expect("waits its turn");
                done.send(n).expect("test alive");
                drop(turn);
            }));
            while queues.waiting(&"a") < n + 1 {
                thread::yield_now();
            }
        }
        drop(first);
        let got: Vec<usize> = (0..3)
            .map(|_| order.recv_timeout(Duration::from_secs(10)).expect("ran"))
            .collect();
        assert_eq!(got, vec![0, 1, 2]);
        for thread in threads {
            thread.join().expect("no panic");
        }
        assert!(
            queues.enter(&"a", Some(Instant::now()), None).is_ok(),
            "free again"
        );
    }

    #[test]
    fn full_queue_refuses_at_once_and_timeouts_leave_the_queue() {
        let queues = LocalQueues::new(0);
        let _first = queues.enter(&"a", None, None).expect("free");
        assert_eq!(
            queues.enter(&"a", None, None).err(),
            Some(Refused::Full { waiting: 0 })
        );
        let queues = LocalQueues::new(5);
        let first = queues.enter(&"a", None, None).expect("free");
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(
            queues.enter(&"a", Some(soon), None).err(),
            Some(Refused::TimedOut)
        );
        assert_eq!(queues.waiting(&"a"), 0);
        drop(first);
        assert!(
            queues.enter(&"b", Some(Instant::now()), None).is_ok(),
            "other names are separate"
        );
    }
}

/// The queue under every interleaving `shuttle` tries (`RUSTFLAGS="--cfg shuttle" cargo test -p
/// redis-lease --lib interleavings`, as `scripts/test` runs it).
#[cfg(all(shuttle, test))]
mod interleavings {
    use super::*;
    use shuttle::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// The holder lets go while a waiter with a deadline may give up at any moment (at, before
    /// or after its turn arrives) and another waits without one. Never two turns at once; a
    /// waiter that gives up as its turn arrives passes it on, so the last waiter always gets
    /// its turn (a lost turn would leave it waiting for ever, which the checker reports as a
    /// deadlock); and the name is free at the end.
    fn turns_are_exclusive_and_none_is_lost() {
        let queues = Arc::new(LocalQueues::new(8));
        let inside = Arc::new(AtomicUsize::new(1));
        let first = queues.enter(&"a", None, None).expect("free");
        let waiters: Vec<_> = [Some(Instant::now() + Duration::from_secs(3600)), None]
            .into_iter()
            .map(|deadline| {
                let (queues, inside) = (Arc::clone(&queues), Arc::clone(&inside));
                shuttle::thread::spawn(move || {
                    if let Ok(turn) = queues.enter(&"a", deadline, None) {
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two turns");
                        shuttle::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(turn);
                    } else {
                        assert!(deadline.is_some(), "a waiter without a deadline refused");
                    }
                })
            })
            .collect();
        shuttle::thread::yield_now();
        inside.fetch_sub(1, Ordering::SeqCst);
        drop(first);
        for waiter in waiters {
            waiter.join().expect("no panic");
        }
        assert!(
            queues.enter(&"a", Some(Instant::now()), None).is_ok(),
            "a turn was left behind"
        );
    }

    #[test]
    fn turns_are_exclusive_and_none_is_lost_under_any_interleaving() {
        hashwheel::checks::explore(turns_are_exclusive_and_none_is_lost, 20_000);
    }
}
