//! Counters a timer keeps about its own work.

use std::time::Duration;

/// A snapshot of a timer's counters, from [`Timer::metrics`](crate::Timer::metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metrics {
    /// Tasks accepted by a `schedule*` call (a recurring task counts once).
    pub scheduled: u64,
    /// Task runs started by the worker (each run of a recurring task counts).
    pub fired: u64,
    /// Tasks cancelled through their handle before they ran.
    pub cancelled: u64,
    /// `schedule*` calls refused because the timer held `max_pending` tasks.
    pub rejected: u64,
    /// Task runs that panicked.
    pub panicked: u64,
    /// The largest delay between a tick boundary that had tasks due and the worker starting to run
    /// them. Tasks queued behind others in one burst start later by the time those others take.
    pub max_lateness: Duration,
    /// How many times the worker woke up (by its deadline, or to see an earlier one).
    pub wakeups: u64,
    /// Tasks waiting in the wheel now.
    pub pending: usize,
}

#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
impl Metrics {
    /// Publishes this snapshot through the [`metrics`] facade, to whatever recorder (exporter)
    /// the program installed: counters `hashwheel_scheduled_total`, `hashwheel_fired_total`,
    /// `hashwheel_cancelled_total`, `hashwheel_rejected_total`, `hashwheel_panicked_total` and
    /// `hashwheel_wakeups_total` (set to the snapshot's totals), and gauges `hashwheel_pending`
    /// and `hashwheel_max_lateness_seconds`, each with the label `timer` = `name`. Nothing is
    /// published between calls: call it when the exporter is scraped, or from a recurring task
    /// on the timer itself.
    pub fn record(&self, name: &str) {
        let labels = [("timer", name.to_owned())];
        let counters = [
            ("hashwheel_scheduled_total", self.scheduled),
            ("hashwheel_fired_total", self.fired),
            ("hashwheel_cancelled_total", self.cancelled),
            ("hashwheel_rejected_total", self.rejected),
            ("hashwheel_panicked_total", self.panicked),
            ("hashwheel_wakeups_total", self.wakeups),
        ];
        for (key, total) in counters {
            metrics::counter!(key, &labels).absolute(total);
        }
        metrics::gauge!("hashwheel_pending", &labels).set(self.pending as f64);
        metrics::gauge!("hashwheel_max_lateness_seconds", &labels)
            .set(self.max_lateness.as_secs_f64());
    }
}
