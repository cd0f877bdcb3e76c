//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod model;

use hashwheel::{ManualClock, Timer};
use std::time::Duration;

/// The tick of the timers the tests build.
pub const TICK: Duration = Duration::from_millis(10);

/// A timer with a 10 ms tick on a fresh manual clock.
pub fn manual_timer() -> (ManualClock, Timer) {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .tick(TICK)
        .clock(clock.clone())
        .build()
        .expect("valid settings");
    (clock, timer)
}
