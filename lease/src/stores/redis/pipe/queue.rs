//! The calls written to a shared connection and not yet answered, in the order they were
//! written: each reply read goes to the oldest call that still awaits one. A call whose caller
//! gave up (its deadline passed) keeps its place, so that its replies, when they come, are read
//! and dropped rather than handed to the calls behind it.

use parking_lot::Mutex;
use redis::Value;
use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::thread::Thread;

/// Why a call got no reply: the connection failed, or was closed.
#[derive(Clone, Debug)]
pub(super) struct Failure {
    pub(super) kind: io::ErrorKind,
    pub(super) text: String,
}

impl Failure {
    pub(super) fn new(kind: io::ErrorKind, text: impl Into<String>) -> Failure {
        Failure {
            kind,
            text: text.into(),
        }
    }

    pub(super) fn error(&self) -> redis::RedisError {
        crate::stores::redis::conn::io_error(self.kind, self.text.clone())
    }
}

/// What a call came to: its replies, in order, or why there are none.
pub(super) type Outcome = Result<Vec<Value>, Failure>;

/// Where a call's outcome is left for its caller, and the caller's thread, woken when it is.
pub(super) struct Slot {
    outcome: Mutex<Option<Outcome>>,
    caller: Thread,
}

impl Slot {
    /// A slot for the calling thread.
    pub(super) fn new() -> Arc<Slot> {
        Arc::new(Slot {
            outcome: Mutex::new(None),
            caller: std::thread::current(),
        })
    }

    /// The outcome, if it has come.
    pub(super) fn take(&self) -> Option<Outcome> {
        self.outcome.lock().take()
    }

    fn fill(&self, outcome: Outcome) {
        *self.outcome.lock() = Some(outcome);
    }

    /// Wakes the caller (to take its outcome, or to read for everyone).
    pub(super) fn wake(&self) {
        self.caller.unpark();
    }
}

/// A call awaiting replies.
struct Pending {
    id: u64,
    expected: usize,
    replies: Vec<Value>,
    /// Where its outcome goes; `None` once nobody waits for it (given up, or written behind
    /// another call with no wish for the replies).
    slot: Option<Arc<Slot>>,
}

#[derive(Default)]
pub(super) struct Queue {
    next_id: u64,
    calls: VecDeque<Pending>,
}

/// A reply came that no call awaits: the connection is out of step with its calls.
#[derive(Debug)]
pub(super) struct Unasked;

impl Queue {
    /// Adds a call expecting `expected` replies (at least one), its outcome left in `slot`
    /// (`None`: nobody waits for it). Returns its id.
    pub(super) fn push(&mut self, expected: usize, slot: Option<Arc<Slot>>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.calls.push_back(Pending {
            id,
            expected: expected.max(1),
            replies: Vec::with_capacity(expected),
            slot,
        });
        id
    }

    /// Hands `value` to the oldest call awaiting a reply; if that was its last, leaves the
    /// call's outcome in its slot and returns the slot, whose caller is to be woken.
    pub(super) fn deliver(&mut self, value: Value) -> Result<Option<Arc<Slot>>, Unasked> {
        let oldest = self.calls.front_mut().ok_or(Unasked)?;
        oldest.replies.push(value);
        if oldest.replies.len() < oldest.expected {
            return Ok(None);
        }
        let Some(done) = self.calls.pop_front() else {
            return Ok(None);
        };
        Ok(done.slot.inspect(|slot| slot.fill(Ok(done.replies))))
    }

    /// Nobody waits for call `id` any more: its replies are dropped when they come.
    pub(super) fn abandon(&mut self, id: u64) {
        if let Some(call) = self.calls.iter_mut().find(|call| call.id == id) {
            call.slot = None;
        }
    }

    /// Ends every call with `failure`; returns the slots whose callers are to be woken.
    pub(super) fn fail_all(&mut self, failure: &Failure) -> Vec<Arc<Slot>> {
        self.calls
            .drain(..)
            .filter_map(|call| call.slot)
            .inspect(|slot| slot.fill(Err(failure.clone())))
            .collect()
    }

    /// The slot of the oldest call someone waits for other than `except`: its caller reads the
    /// replies next.
    pub(super) fn next_reader(&self, except: u64) -> Option<Arc<Slot>> {
        self.calls
            .iter()
            .filter(|call| call.id != except)
            .find_map(|call| call.slot.clone())
    }

    /// Whether a call is still awaited by its caller.
    #[cfg(test)]
    fn awaited(&self) -> bool {
        self.calls.iter().any(|call| call.slot.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(n: i64) -> Value {
        Value::Int(n)
    }

    fn replies(slot: &Slot) -> Option<Vec<Value>> {
        slot.take().and_then(Result::ok)
    }

    #[test]
    fn replies_go_to_the_calls_in_order_and_a_given_up_call_gets_none() {
        let mut queue = Queue::default();
        let (first, second, third) = (Slot::new(), Slot::new(), Slot::new());
        queue.push(2, Some(first.clone()));
        let given_up = queue.push(1, Some(second.clone()));
        queue.push(1, Some(third.clone()));
        queue.abandon(given_up);
        assert!(
            queue.deliver(int(1)).expect("asked").is_none(),
            "one more to come"
        );
        let done = queue
            .deliver(int(2))
            .expect("asked")
            .expect("the first is done");
        assert!(Arc::ptr_eq(&done, &first));
        assert!(
            queue.deliver(int(3)).expect("asked").is_none(),
            "nobody waits"
        );
        assert!(queue.deliver(int(4)).expect("asked").is_some());
        assert_eq!(replies(&first), Some(vec![int(1), int(2)]));
        assert_eq!(replies(&second), None, "its reply, 3, is dropped");
        assert_eq!(replies(&third), Some(vec![int(4)]));
        assert!(queue.deliver(int(5)).is_err(), "nobody asked");
        assert!(!queue.awaited());
    }

    #[test]
    fn a_failure_ends_every_awaited_call() {
        let mut queue = Queue::default();
        let slot = Slot::new();
        queue.push(1, Some(slot.clone()));
        queue.push(3, None);
        assert!(queue.awaited());
        assert!(queue.next_reader(u64::MAX).is_some());
        let failure = Failure::new(io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(queue.fail_all(&failure).len(), 1);
        assert!(matches!(slot.take(), Some(Err(_))));
        assert!(!queue.awaited());
        assert!(queue.next_reader(u64::MAX).is_none());
    }
}
