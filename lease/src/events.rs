//! What a client tells a [`metrics`](https://docs.rs/metrics) recorder as it happens (feature
//! `metrics`; without it every method here does nothing): acquisitions by outcome, how long each
//! waited and each hold lasted, renewals by outcome, losses by reason, and the threads waiting in
//! the client's local queues. Each carries the label `client`: the name given to
//! [`ClientBuilder::name`](crate::ClientBuilder::name), else the client's id.

// Without the feature the names are kept for the documentation's list, and nothing uses them.
#![cfg_attr(not(feature = "metrics"), allow(dead_code))]

use crate::lost::LostReason;
use std::sync::Arc;
use std::time::Duration;

/// Acquisitions, by outcome (label `outcome`).
pub(crate) const ACQUISITIONS: &str = "redis_lease_acquisitions_total";
/// How long acquisitions that got the lock waited, in seconds.
pub(crate) const ACQUIRE_WAIT: &str = "redis_lease_acquire_wait_seconds";
/// How long holds lasted, from acquisition to release (or abandonment), in seconds.
pub(crate) const HOLD_TIME: &str = "redis_lease_hold_seconds";
/// Leases sent for renewal, by outcome (label `outcome`).
pub(crate) const RENEWALS: &str = "redis_lease_renewals_total";
/// Holds found lost, by reason (label `reason`).
pub(crate) const LOSSES: &str = "redis_lease_losses_total";
/// Threads in the client's local queues now, contenders included.
pub(crate) const LOCAL_WAITERS: &str = "redis_lease_local_waiters";

/// How an acquisition ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireOutcome {
    /// Held at the first attempt.
    Uncontended,
    /// Held after finding the lock taken.
    Contended,
    /// Not held: one attempt found it taken, or the wait ran out.
    TimedOut,
    /// The wait was cancelled.
    Cancelled,
    /// Failed with an error.
    Error,
}

impl AcquireOutcome {
    fn label(self) -> &'static str {
        match self {
            AcquireOutcome::Uncontended => "uncontended",
            AcquireOutcome::Contended => "contended",
            AcquireOutcome::TimedOut => "timed_out",
            AcquireOutcome::Cancelled => "cancelled",
            AcquireOutcome::Error => "error",
        }
    }
}

/// How a lease sent for renewal came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RenewOutcome {
    Renewed,
    /// The store says the hold no longer holds the lock.
    Gone,
    /// No answer that settles it: tried again.
    Failed,
}

impl RenewOutcome {
    fn label(self) -> &'static str {
        match self {
            RenewOutcome::Renewed => "renewed",
            RenewOutcome::Gone => "gone",
            RenewOutcome::Failed => "failed",
        }
    }
}

/// A client's events, labelled with its name.
#[derive(Clone, Debug)]
pub(crate) struct Events {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    client: Arc<str>,
}

impl Default for Events {
    fn default() -> Events {
        Events {
            client: Arc::from(""),
        }
    }
}

impl Events {
    /// The events of the client `client`; the first client of the process describes every
    /// metric to the recorder.
    pub(crate) fn new(client: &str) -> Events {
        #[cfg(feature = "metrics")]
        {
            static DESCRIBED: std::sync::Once = std::sync::Once::new();
            DESCRIBED.call_once(describe);
        }
        Events {
            client: Arc::from(client),
        }
    }

    /// An acquisition ended as `outcome`, after `waited`.
    pub(crate) fn acquisition(&self, outcome: AcquireOutcome, waited: Duration) {
        #[cfg(feature = "metrics")]
        {
            let client = self.label();
            metrics::counter!(ACQUISITIONS, "client" => client.clone(), "outcome" => outcome.label())
                .increment(1);
            if matches!(
                outcome,
                AcquireOutcome::Uncontended | AcquireOutcome::Contended
            ) {
                metrics::histogram!(ACQUIRE_WAIT, "client" => client).record(waited.as_secs_f64());
            }
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (outcome.label(), waited);
    }

    /// A hold ended after `held`.
    pub(crate) fn held(&self, held: Duration) {
        #[cfg(feature = "metrics")]
        metrics::histogram!(HOLD_TIME, "client" => self.label()).record(held.as_secs_f64());
        #[cfg(not(feature = "metrics"))]
        let _ = held;
    }

    /// `count` leases sent for renewal came back as `outcome`.
    pub(crate) fn renewals(&self, outcome: RenewOutcome, count: u64) {
        #[cfg(feature = "metrics")]
        if count > 0 {
            metrics::counter!(RENEWALS, "client" => self.label(), "outcome" => outcome.label())
                .increment(count);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (outcome.label(), count);
    }

    /// A hold was found lost.
    pub(crate) fn lost(&self, reason: LostReason) {
        #[cfg(feature = "metrics")]
        metrics::counter!(LOSSES, "client" => self.label(), "reason" => reason_label(reason))
            .increment(1);
        #[cfg(not(feature = "metrics"))]
        let _ = reason_label(reason);
    }

    /// A thread entered (`+1`) or left (`-1`) a local queue.
    pub(crate) fn local_waiters(&self, change: i8) {
        #[cfg(feature = "metrics")]
        {
            let gauge = metrics::gauge!(LOCAL_WAITERS, "client" => self.label());
            if change >= 0 {
                gauge.increment(f64::from(change));
            } else {
                gauge.decrement(-f64::from(change));
            }
        }
        #[cfg(not(feature = "metrics"))]
        let _ = change;
    }

    #[cfg(feature = "metrics")]
    fn label(&self) -> metrics::SharedString {
        metrics::SharedString::from(Arc::clone(&self.client))
    }
}

/// A loss's reason as a label.
fn reason_label(reason: LostReason) -> &'static str {
    match reason {
        LostReason::Expired => "expired",
        LostReason::Unconfirmed => "unconfirmed",
        LostReason::Taken => "taken",
        LostReason::MaxHold => "max_hold",
        LostReason::TimerStopped => "timer_stopped",
    }
}

/// Describes every metric to the recorder: its help and unit.
#[cfg(feature = "metrics")]
fn describe() {
    use metrics::Unit;
    metrics::describe_counter!(
        ACQUISITIONS,
        Unit::Count,
        "Acquisitions, by outcome: uncontended, contended, timed_out, cancelled, error"
    );
    metrics::describe_histogram!(
        ACQUIRE_WAIT,
        Unit::Seconds,
        "How long acquisitions that got the lock waited"
    );
    metrics::describe_histogram!(
        HOLD_TIME,
        Unit::Seconds,
        "How long holds lasted, from acquisition to release or abandonment"
    );
    metrics::describe_counter!(
        RENEWALS,
        Unit::Count,
        "Leases sent for renewal, by outcome: renewed, gone, failed"
    );
    metrics::describe_counter!(
        LOSSES,
        Unit::Count,
        "Holds found lost, by reason: expired, unconfirmed, taken, max_hold, timer_stopped"
    );
    metrics::describe_gauge!(
        LOCAL_WAITERS,
        Unit::Count,
        "Threads in the client's local queues, contenders included"
    );
}
