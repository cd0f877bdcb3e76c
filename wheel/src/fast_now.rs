//! A cheap reading of the monotonic clock for computing deadlines: never before
//! `Instant::now()`, and at most [`SLACK`] (twice that in the worst case) after it.
//!
//! Every `schedule` reads the time to turn its delay into a deadline. `Instant::now()` costs 24 to
//! 33 ns on the machines measured (`docs/benchmarks.md`), the largest single cost of a schedule;
//! the CPU's time-stamp counter, read through `quanta`, costs about 11. Each thread keeps an
//! [`Anchor`]: a counter reading, and an `Instant` read just after it. A later reading is the
//! anchor's instant, plus the counter's time since the anchor, plus [`SLACK`]. Once the counter
//! is [`ANCHOR_AGE`] past the anchor, or behind it, the thread reads `Instant::now()` and anchors
//! again: one exact read per 10 ms of a busy thread.
//!
//! # Why a deadline from it is never early
//!
//! The anchor's instant is read after its counter reading, so it is at or after the time of that
//! reading. From the anchor to a later reading, the counter's time may differ from the monotonic
//! clock's by its rate error (quanta calibrates the rate against the monotonic clock, which NTP
//! may then slew by up to 500 ppm; the calibration measured 11 ppm here) and by the skew between
//! two cores' counters if the thread moved. [`SLACK`] covers a rate error of [`RATE_ERROR_PPM`]
//! over [`ANCHOR_AGE`] and a skew of [`SKEW`], so the reading is at or after the true time, and a
//! deadline computed from it is at or after the one `Instant::now()` would give. The price: it
//! may be later by up to twice [`SLACK`] (60 µs), so a task may run that much later.
//!
//! The counter is used only where the kernel itself keeps time with it (Linux's clocksource is
//! `tsc`: it found the cores' counters invariant and in step). Elsewhere the reading is
//! `Instant::now()`.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How far the counter may move past an anchor before the thread anchors again.
pub(crate) const ANCHOR_AGE: Duration = Duration::from_millis(10);

/// The largest rate error between the counter and the monotonic clock that [`SLACK`] covers, in
/// parts per million.
pub(crate) const RATE_ERROR_PPM: u64 = 1_000;

/// The largest skew between two cores' counters that [`SLACK`] covers.
pub(crate) const SKEW: Duration = Duration::from_micros(20);

/// What a reading adds to the anchor's instant and the counter's time since: a rate error of
/// [`RATE_ERROR_PPM`] over [`ANCHOR_AGE`], plus [`SKEW`] (30 µs).
pub(crate) const SLACK: Duration = Duration::from_nanos(
    ANCHOR_AGE.as_nanos() as u64 * RATE_ERROR_PPM / 1_000_000 + SKEW.as_nanos() as u64,
);

/// A reading of a cheap counter, and the counter time between two readings.
pub(crate) trait Counter: Copy {
    /// The counter time from `earlier` to `self` in nanoseconds; `None` if the counter went back.
    fn since(self, earlier: Self) -> Option<u64>;
}

/// A raw reading of the time-stamp counter, with the calibration that turns it into time.
#[derive(Clone, Copy)]
pub(crate) struct Tsc {
    raw: u64,
    clock: &'static quanta::Clock,
}

impl Counter for Tsc {
    #[inline]
    fn since(self, earlier: Self) -> Option<u64> {
        (self.raw >= earlier.raw).then(|| self.clock.delta_as_nanos(earlier.raw, self.raw))
    }
}

/// A counter reading and the time read just after it, in nanoseconds since [`epoch`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Anchor<C> {
    counter: C,
    nanos: u64,
}

impl<C: Counter> Anchor<C> {
    /// An anchor at `counter`, which must have been read before `reference` is called.
    pub(crate) fn take(counter: C, reference: impl FnOnce() -> u64) -> Self {
        Anchor {
            counter,
            nanos: reference(),
        }
    }

    /// A time at or after the one at which `counter` was read, or `None` if the counter is
    /// behind the anchor or more than [`ANCHOR_AGE`] past it.
    #[inline]
    pub(crate) fn upper_bound(&self, counter: C) -> Option<u64> {
        let since = counter
            .since(self.counter)
            .filter(|since| *since <= ANCHOR_AGE.as_nanos() as u64)?;
        Some(self.nanos.saturating_add(since + SLACK.as_nanos() as u64))
    }
}

impl std::fmt::Debug for Tsc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Tsc").field(&self.raw).finish()
    }
}

thread_local! {
    /// This thread's anchor, `None` until it first reads.
    static ANCHOR: Cell<Option<Anchor<Tsc>>> = const { Cell::new(None) };
}

/// The instant from which readings count, set by the first [`warm_up`]: before the origin of
/// every timer on the monotonic clock.
pub(crate) fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds from [`epoch`] to `instant`, saturating.
#[inline]
fn since_epoch(epoch: Instant, instant: Instant) -> u64 {
    u64::try_from(instant.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX)
}

/// The calibrated time-stamp counter, where the kernel keeps time with it.
#[inline]
fn counter_clock() -> Option<&'static quanta::Clock> {
    static CLOCK: OnceLock<Option<quanta::Clock>> = OnceLock::new();
    CLOCK
        .get_or_init(|| {
            let usable = cfg!(all(target_os = "linux", target_arch = "x86_64"))
                && std::fs::read_to_string(
                    "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                )
                .is_ok_and(|source| source.trim() == "tsc");
            // Calibrates once, here rather than in a first `schedule`.
            usable.then(quanta::Clock::new)
        })
        .as_ref()
}

/// Sets the epoch and prepares the counter (checks the clock source, calibrates), so that the
/// first deadline is as cheap as the rest. Returns the epoch.
pub(crate) fn warm_up() -> Instant {
    let epoch = epoch();
    let _ = counter_clock();
    epoch
}

/// A time at or after `Instant::now()`, at most twice [`SLACK`] after it, in nanoseconds since
/// [`epoch`].
#[inline]
pub(crate) fn now_upper_bound() -> u64 {
    let epoch = epoch();
    let Some(clock) = counter_clock() else {
        return since_epoch(epoch, Instant::now());
    };
    let counter = Tsc {
        raw: clock.raw(),
        clock,
    };
    ANCHOR.with(|anchor| {
        if let Some(now) = anchor.get().and_then(|held| held.upper_bound(counter)) {
            return now;
        }
        let fresh = Anchor::take(counter, || since_epoch(epoch, Instant::now()));
        anchor.set(Some(fresh));
        fresh.nanos
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::tick::Ticks;

    /// A counter that reads a manual clock's time since `origin` at a rate off by `ppm` parts
    /// per million, shifted by `skew` nanoseconds: as a core's time-stamp counter may be.
    #[derive(Clone, Copy, Debug)]
    struct Skewed(i128);

    impl Counter for Skewed {
        fn since(self, earlier: Self) -> Option<u64> {
            u64::try_from(self.0 - earlier.0).ok()
        }
    }

    /// The manual clock's time in nanoseconds since `origin`.
    fn nanos(clock: &ManualClock, origin: Instant) -> u64 {
        since_epoch(origin, clock.now())
    }

    fn read(clock: &ManualClock, origin: Instant, ppm: i128, skew: i128) -> Skewed {
        let nanos = clock.now().duration_since(origin).as_nanos() as i128;
        Skewed(nanos * (1_000_000 + ppm) / 1_000_000 + skew)
    }

    #[test]
    fn slack_covers_the_rate_error_over_an_anchor_age_and_the_skew() {
        assert_eq!(SLACK, Duration::from_micros(30));
    }

    /// Anchors at the manual clock's time, moves the clock in steps, and reads the counter at
    /// every rate error and skew that [`SLACK`] covers: every reading is at or after the clock's
    /// time, and every deadline computed from it is at or after the exact one.
    #[test]
    fn a_deadline_from_the_cheap_reading_is_never_early() {
        let tick = Duration::from_millis(1);
        let steps = [
            Duration::from_nanos(1),
            Duration::from_micros(333),
            Duration::from_micros(1_000),
            Duration::from_micros(2_719),
        ];
        let delays = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_micros(999_970),
            Duration::from_millis(1),
            Duration::from_secs(60),
        ];
        let mut checked = 0;
        for ppm in [-1_000, -11, 0, 11, 1_000] {
            for skew in [-20_000, 0, 20_000] {
                let clock = ManualClock::new();
                let origin = clock.now();
                let ticks = Ticks::new(origin, tick).counted_from(origin);
                clock.advance(Duration::from_micros(123));
                let anchor = Anchor::take(read(&clock, origin, ppm, 0), || nanos(&clock, origin));
                for step in steps.iter().cycle().take(12) {
                    clock.advance(*step);
                    let Some(upper) = anchor.upper_bound(read(&clock, origin, ppm, skew)) else {
                        continue;
                    };
                    let now = clock.now();
                    let exact_nanos = nanos(&clock, origin);
                    assert!(
                        upper >= exact_nanos,
                        "reading early: ppm {ppm}, skew {skew}"
                    );
                    assert!(
                        upper - exact_nanos <= 2 * SLACK.as_nanos() as u64,
                        "reading too late"
                    );
                    for delay in delays {
                        let exact = ticks.delay_tick(now, delay);
                        let cheap = ticks.delay_tick_since_epoch(upper, delay);
                        assert!(cheap >= exact, "deadline early: ppm {ppm}, skew {skew}");
                        let boundary = ticks.instant_of(cheap).expect("in range");
                        assert!(boundary >= now + delay);
                        assert!(boundary - (now + delay) < tick + 2 * SLACK);
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 300, "only {checked} readings were young enough");
    }

    #[test]
    fn an_old_anchor_or_a_counter_gone_back_reads_nothing() {
        let clock = ManualClock::new();
        let origin = clock.now();
        clock.advance(Duration::from_millis(5));
        let anchor = Anchor::take(read(&clock, origin, 0, 0), || nanos(&clock, origin));
        assert!(anchor.upper_bound(read(&clock, origin, 0, -1)).is_none());
        clock.advance(ANCHOR_AGE);
        assert!(anchor.upper_bound(read(&clock, origin, 0, 0)).is_some());
        clock.advance(Duration::from_nanos(1));
        assert!(anchor.upper_bound(read(&clock, origin, 0, 0)).is_none());
    }

    #[test]
    fn the_real_reading_is_never_before_the_monotonic_clock() {
        let epoch = warm_up();
        for _ in 0..100_000 {
            let before = since_epoch(epoch, Instant::now());
            assert!(now_upper_bound() >= before);
        }
    }
}
