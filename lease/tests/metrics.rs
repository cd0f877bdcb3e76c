//! The watchdog's gauges and its timer's counters published through the `metrics` facade on
//! request (`Client::record_metrics`); the events are in `metrics_events.rs`.
#![cfg(feature = "metrics")]

mod common;

use common::{manual_client, wait_until, RedisServer};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use std::time::Duration;

#[test]
fn a_watched_hold_shows_in_the_published_gauges() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(3);
    let (client, clock, _timer) = manual_client(&server, lease);
    let guard = client
        .lock("measured")
        .expect("valid")
        .lock()
        .expect("free");
    clock.advance(lease / 3);
    wait_until("the renewal is confirmed", || {
        client.watchdog_metrics().renewed >= 1
    });

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || client.record_metrics());
    let published: Vec<(String, Vec<String>, DebugValue)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels = key.labels().map(|label| label.key().to_owned()).collect();
            (key.name().to_owned(), labels, value)
        })
        .collect();
    let find = |name: &str| {
        published
            .iter()
            .find(|(key, _, _)| key == name)
            .unwrap_or_else(|| panic!("{name} not published: {published:?}"))
    };
    let (_, labels, watched) = find("redis_lease_watched");
    assert_eq!(labels, &["client"]);
    assert_eq!(watched, &DebugValue::Gauge(1.0.into()));
    assert_eq!(
        find("redis_lease_renewals_in_flight").2,
        DebugValue::Gauge(0.0.into())
    );
    let (_, labels, scheduled) = find("hashwheel_scheduled_total");
    assert_eq!(labels, &["timer"]);
    assert!(matches!(scheduled, DebugValue::Counter(n) if *n >= 2));
    guard.unlock().expect("held");
}
