//! [`WatchdogMetrics`]: counters of a client's watchdog.

/// A snapshot of a client's watchdog counters, from
/// [`Client::watchdog_metrics`](crate::Client::watchdog_metrics). Counts run from the client's
/// start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchdogMetrics {
    /// Holds watched now: every live guard's hold, renewed or not (a reentrant hold counts once).
    pub watched: usize,
    /// Leases in a renewal call that has not returned yet.
    pub in_flight: usize,
    /// Renewal round trips: script calls sent, each renewing up to the batch size of leases.
    pub renewal_calls: u64,
    /// Leases sent for renewal, over all calls.
    pub renewals_sent: u64,
    /// Leases whose renewal Redis confirmed.
    pub renewed: u64,
    /// Renewal calls that failed (connection lost, timed out); their leases were retried.
    pub failed_calls: u64,
    /// Holds found lost, for any reason.
    pub lost: u64,
}

#[cfg(feature = "metrics")]
impl WatchdogMetrics {
    /// Publishes this snapshot through the [`metrics`] facade, to whatever recorder (exporter)
    /// the program installed: counters `redis_lease_renewal_calls_total`,
    /// `redis_lease_renewals_sent_total`, `redis_lease_renewed_total`,
    /// `redis_lease_renewal_calls_failed_total` and `redis_lease_lost_total` (set to the
    /// snapshot's totals), and gauges `redis_lease_watched` and `redis_lease_renewals_in_flight`,
    /// each with the label `client` = `name`.
    pub fn record(&self, name: &str) {
        let labels = [("client", name.to_owned())];
        let counters = [
            ("redis_lease_renewal_calls_total", self.renewal_calls),
            ("redis_lease_renewals_sent_total", self.renewals_sent),
            ("redis_lease_renewed_total", self.renewed),
            ("redis_lease_renewal_calls_failed_total", self.failed_calls),
            ("redis_lease_lost_total", self.lost),
        ];
        for (key, total) in counters {
            metrics::counter!(key, &labels).absolute(total);
        }
        metrics::gauge!("redis_lease_watched", &labels).set(self.watched as f64);
        metrics::gauge!("redis_lease_renewals_in_flight", &labels).set(self.in_flight as f64);
    }
}
