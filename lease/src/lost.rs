//! What a holder is told about its lease: until when it is known valid, and whether (and why) it
//! was lost. The watchdog writes a [`Status`]; every guard of the hold reads it.

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Instant;

/// The receiving end a guard's `lost_signal()` returns: it gets one [`Lost`] when the hold can no
/// longer be trusted. A `crossbeam_channel::Receiver` (re-exported as
/// [`redis_lease::crossbeam_channel`](crate::crossbeam_channel)), so that it can wait in a
/// `select!` beside the caller's own channels; `recv_timeout` and `try_recv` need no import.
pub type LostSignal = Receiver<Lost>;

/// Why a hold can no longer be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// The lock was taken with an explicit lease, which is never renewed, and that lease ran out.
    Expired,
    /// No renewal was confirmed before the local deadline: the server was slow, paused or
    /// unreachable. The lease may still exist there for a moment, but nothing vouches for it any
    /// more.
    Unconfirmed,
    /// The server answered that the lease is gone or held by another owner: it expired, was
    /// deleted, force-unlocked or taken over (on ZooKeeper: the session expired, or the hold's
    /// node was deleted).
    Taken,
    /// The lock's `max_hold` was reached: renewal stopped and the lease ran out.
    MaxHold,
    /// The watchdog's timer was stopped, so the lease can be neither renewed nor watched.
    TimerStopped,
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LostReason::Expired => "its lease ran out (it is not renewed)",
            LostReason::Unconfirmed => "no renewal was confirmed before its deadline",
            LostReason::Taken => "the server says it is gone or held by another owner",
            LostReason::MaxHold => "it was held for its max_hold",
            LostReason::TimerStopped => "the watchdog's timer was stopped",
        })
    }
}

/// The news that a hold was lost, as sent to each receiver from
/// [`LeaseGuard::lost_signal`](crate::LeaseGuard::lost_signal).
///
/// Its `Debug` does not show the owner id, which is a credential.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lost {
    /// The lock's name.
    pub name: String,
    /// The owner id that held it (a credential: keep it out of logs).
    pub owner: String,
    /// Why it is lost.
    pub reason: LostReason,
    /// The local deadline the hold had when it was lost: until then it was known valid.
    pub valid_until: Instant,
    /// The id of the hold that was lost, for the backend that ends it in the server.
    pub(crate) hold: Arc<str>,
}

impl std::fmt::Debug for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lost")
            .field("name", &self.name)
            .field("reason", &self.reason)
            .field("valid_until", &self.valid_until)
            .finish_non_exhaustive()
    }
}

/// One hold's standing, shared by the watchdog and the hold's guards.
pub(crate) struct Status {
    state: Mutex<Standing>,
}

/// Who is told of a loss.
enum Listener {
    Channel(Sender<Lost>),
    Call(Box<dyn FnOnce(&Lost) + Send>),
}

struct Standing {
    valid_until: Instant,
    lost: Option<Lost>,
    listeners: Vec<Listener>,
}

impl Status {
    pub(crate) fn new(valid_until: Instant) -> Self {
        Status {
            state: Mutex::new(Standing {
                valid_until,
                lost: None,
                listeners: Vec::new(),
            }),
        }
    }

    pub(crate) fn valid_until(&self) -> Instant {
        self.state.lock().valid_until
    }

    /// Moves the deadline later, unless the hold is lost already.
    pub(crate) fn extend(&self, valid_until: Instant) {
        let mut state = self.state.lock();
        if state.lost.is_none() && valid_until > state.valid_until {
            state.valid_until = valid_until;
        }
    }

    pub(crate) fn lost(&self) -> Option<Lost> {
        self.state.lock().lost.clone()
    }

    /// Records the loss and tells every listener, once; later calls change nothing. The calls
    /// run on this thread, after the status is let go.
    pub(crate) fn mark_lost(&self, lost: Lost) {
        let listeners = {
            let mut state = self.state.lock();
            if state.lost.is_some() {
                return;
            }
            state.lost = Some(lost.clone());
            std::mem::take(&mut state.listeners)
        };
        for listener in listeners {
            tell(listener, &lost);
        }
    }

    /// A receiver that gets one [`Lost`] when the hold is lost (at once if it is already).
    pub(crate) fn subscribe(&self) -> Receiver<Lost> {
        let (tell, told) = crossbeam_channel::bounded(1);
        self.subscribe_with(tell);
        told
    }

    /// Sends one [`Lost`] on `listener` when the hold is lost (at once if it is already). The
    /// channel must have room for it, or the message is dropped.
    pub(crate) fn subscribe_with(&self, listener: Sender<Lost>) {
        self.listen(Listener::Channel(listener));
    }

    /// Calls `told` once when the hold is lost (at once if it is already), on the thread that
    /// finds it lost.
    pub(crate) fn on_lost(&self, told: Box<dyn FnOnce(&Lost) + Send>) {
        self.listen(Listener::Call(told));
    }

    fn listen(&self, listener: Listener) {
        let mut state = self.state.lock();
        match state.lost.clone() {
            Some(lost) => {
                drop(state);
                tell(listener, &lost);
            }
            None => state.listeners.push(listener),
        }
    }
}

/// Tells one listener of `lost`.
fn tell(listener: Listener, lost: &Lost) {
    match listener {
        // A bounded(1) channel that only ever gets this one message: never full, and a
        // receiver that is gone is nobody's loss.
        Listener::Channel(sender) => {
            let _ = sender.try_send(lost.clone());
        }
        Listener::Call(told) => told(lost),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn lost(reason: LostReason, valid_until: Instant) -> Lost {
        Lost {
            name: "a".into(),
            owner: "me".into(),
            reason,
            valid_until,
            hold: Arc::from("h"),
        }
    }

    #[test]
    fn every_receiver_hears_of_a_loss_once_and_late_ones_at_once() {
        let start = Instant::now();
        let status = Status::new(start);
        let early = [status.subscribe(), status.subscribe()];
        status.extend(start + Duration::from_secs(1));
        assert_eq!(status.valid_until(), start + Duration::from_secs(1));
        status.mark_lost(lost(LostReason::Taken, start + Duration::from_secs(1)));
        status.mark_lost(lost(LostReason::Unconfirmed, start));
        for receiver in &early {
            assert_eq!(receiver.try_recv().map(|l| l.reason), Ok(LostReason::Taken));
            assert!(receiver.try_recv().is_err(), "told once");
        }
        let late = status.subscribe();
        assert_eq!(late.try_recv().map(|l| l.reason), Ok(LostReason::Taken));
        status.extend(start + Duration::from_secs(5));
        assert_eq!(
            status.valid_until(),
            start + Duration::from_secs(1),
            "a lost hold is never extended"
        );
    }
}
