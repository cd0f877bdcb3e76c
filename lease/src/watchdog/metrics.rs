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
    /// Renewal round trips: calls sent, each renewing up to the batch size of leases.
    pub renewal_calls: u64,
    /// Leases sent for renewal, over all calls.
    pub renewals_sent: u64,
    /// Leases whose renewal the store confirmed.
    pub renewed: u64,
    /// Renewal calls that failed (connection lost, timed out); their leases were retried.
    pub failed_calls: u64,
    /// Holds found lost, for any reason.
    pub lost: u64,
}

#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
impl WatchdogMetrics {
    /// Publishes this snapshot's gauges through the [`metrics`] facade, to whatever recorder
    /// (exporter) the program installed: `redis_lease_watched` and
    /// `redis_lease_renewals_in_flight`, each with the label `client` = `name`. The counters
    /// (renewals, losses) are published as they happen (see "Metrics" in
    /// [`crate::guide::library`]).
    pub fn record(&self, name: &str) {
        let labels = [("client", name.to_owned())];
        metrics::gauge!("redis_lease_watched", &labels).set(self.watched as f64);
        metrics::gauge!("redis_lease_renewals_in_flight", &labels).set(self.in_flight as f64);
    }
}
