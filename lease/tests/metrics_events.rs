//! The client's events, published through the `metrics` facade as they happen: acquisitions by
//! outcome, waits and holds as histograms, renewals by outcome, losses by reason, local waiters;
//! every metric described, with the client's chosen name as its label. One test: the recorder
//! is the process's.
#![cfg(feature = "metrics")]

mod common;

use common::RedisServer;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::{CompositeKey, MetricKind};
use redis_lease::Client;
use std::time::Duration;

/// One snapshot's entries (a snapshot drains what it reads: take one).
type Entries = Vec<(
    CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
)>;

/// The value of `name` of the client `billing`, with the label `key` = `value` if given.
fn value<'a>(
    entries: &'a Entries,
    name: &str,
    label: Option<(&str, &str)>,
) -> Option<&'a DebugValue> {
    entries
        .iter()
        .find(|(key, _, _, _)| {
            let key = key.key();
            key.name() == name
                && key
                    .labels()
                    .any(|l| l.key() == "client" && l.value() == "billing")
                && label.is_none_or(|(k, v)| key.labels().any(|l| l.key() == k && l.value() == v))
        })
        .map(|(_, _, _, value)| value)
}

fn counter(entries: &Entries, name: &str, label: (&str, &str)) -> u64 {
    match value(entries, name, Some(label)) {
        Some(DebugValue::Counter(n)) => *n,
        None => 0,
        other => panic!("{name}: {other:?}"),
    }
}

fn samples(entries: &Entries, name: &str) -> usize {
    match value(entries, name, None) {
        Some(DebugValue::Histogram(samples)) => samples.len(),
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn events_are_published_as_they_happen() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().expect("the only recorder");
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .name("billing")
        .default_lease(Duration::from_millis(300))
        .command_timeout(Duration::from_millis(500))
        .build()
        .expect("valid settings");
    let lock = client.lock("metered").expect("valid");
    let held = lock.lock().expect("free");
    // Renewed at least once, while a thread of another client waits and gives up.
    let other = Client::builder(server.url())
        .name("billing")
        .build()
        .expect("valid settings");
    let waiter = other.lock("metered").expect("valid");
    let gave_up = std::thread::spawn(move || waiter.try_lock_for(Duration::from_millis(400)));
    std::thread::sleep(Duration::from_millis(500));
    assert!(gave_up
        .join()
        .expect("no panic")
        .expect("reachable")
        .is_none());
    held.unlock().expect("held");
    let again = lock.try_lock().expect("reachable").expect("free");
    // A fixed lease that runs out is lost, with its reason.
    let fixed = client
        .lock("fixed")
        .expect("valid")
        .with_lease(Duration::from_millis(100))
        .lock()
        .expect("free");
    let lost = fixed
        .lost_signal()
        .recv_timeout(Duration::from_secs(5))
        .expect("told");
    assert_eq!(lost.reason, redis_lease::LostReason::Expired);
    drop((again, fixed));

    let acquisitions = "redis_lease_acquisitions_total";
    let entries: Entries = snapshotter.snapshot().into_vec();
    assert_eq!(
        counter(&entries, acquisitions, ("outcome", "uncontended")),
        3
    );
    assert_eq!(counter(&entries, acquisitions, ("outcome", "timed_out")), 1);
    assert_eq!(samples(&entries, "redis_lease_acquire_wait_seconds"), 3);
    assert_eq!(samples(&entries, "redis_lease_hold_seconds"), 3);
    assert!(
        counter(
            &entries,
            "redis_lease_renewals_total",
            ("outcome", "renewed")
        ) >= 1
    );
    assert_eq!(
        counter(&entries, "redis_lease_losses_total", ("reason", "expired")),
        1
    );
    assert_eq!(
        value(&entries, "redis_lease_local_waiters", None),
        Some(&DebugValue::Gauge(0.0.into())),
        "every waiter left its queue"
    );
    // Every metric is described, with its unit.
    let described: Vec<(MetricKind, String)> = entries
        .into_iter()
        .filter(|(_, unit, description, _)| unit.is_some() && description.is_some())
        .map(|(key, _, _, _)| (key.kind(), key.key().name().to_owned()))
        .collect();
    for name in [
        acquisitions,
        "redis_lease_acquire_wait_seconds",
        "redis_lease_hold_seconds",
        "redis_lease_renewals_total",
        "redis_lease_losses_total",
        "redis_lease_local_waiters",
    ] {
        assert!(
            described.iter().any(|(_, described)| described == name),
            "{name} described: {described:?}"
        );
    }
}
