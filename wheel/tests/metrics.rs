//! The timer's counters published through the `metrics` facade.
#![cfg(feature = "metrics")]

use hashwheel::{ManualClock, Timer};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use std::time::Duration;

#[test]
fn a_snapshot_is_published_under_the_documented_names() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .build()
        .expect("valid settings");
    let fired = timer
        .schedule(Duration::from_millis(5), || {})
        .expect("scheduled");
    let cancelled = timer
        .schedule(Duration::from_secs(5), || {})
        .expect("scheduled");
    assert!(cancelled.cancel());
    let _pending = timer
        .schedule(Duration::from_secs(9), || {})
        .expect("scheduled");
    clock.advance(Duration::from_millis(10));
    assert!(fired.is_expired());

    metrics::with_local_recorder(&recorder, || timer.metrics().record("t"));
    let values: Vec<(String, DebugValue)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let label = key.labels().next().map(|label| label.value().to_owned());
            assert_eq!(label.as_deref(), Some("t"), "{key:?}");
            (key.name().to_owned(), value)
        })
        .collect();
    let value = |name: &str| {
        values
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value)
            .unwrap_or_else(|| panic!("{name} not published: {values:?}"))
    };
    assert_eq!(value("hashwheel_scheduled_total"), &DebugValue::Counter(3));
    assert_eq!(value("hashwheel_fired_total"), &DebugValue::Counter(1));
    assert_eq!(value("hashwheel_cancelled_total"), &DebugValue::Counter(1));
    assert_eq!(value("hashwheel_rejected_total"), &DebugValue::Counter(0));
    assert_eq!(value("hashwheel_panicked_total"), &DebugValue::Counter(0));
    assert_eq!(value("hashwheel_pending"), &DebugValue::Gauge(1.0.into()));
    assert!(matches!(
        *value("hashwheel_wakeups_total"),
        DebugValue::Counter(_)
    ));
    assert!(matches!(
        *value("hashwheel_max_lateness_seconds"),
        DebugValue::Gauge(_)
    ));
}
