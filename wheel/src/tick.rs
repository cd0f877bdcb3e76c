//! The one place where `Instant`s become ticks and back.
//!
//! A deadline rounds *up* to the next tick boundary and the current time rounds *down*, so a task is
//! handed out only once its tick boundary, and therefore its deadline, has passed: never early.
//! Anything past the range of `u64` ticks or of `Instant` saturates to [`NEVER`].

use std::time::{Duration, Instant};

/// A tick that is never reached.
pub(crate) const NEVER: u64 = u64::MAX;

/// A duration in nanoseconds, saturating at `u64::MAX` (about 584 years), which means "never".
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticks {
    origin: Instant,
    tick_nanos: u64,
}

impl Ticks {
    pub(crate) fn new(origin: Instant, tick: Duration) -> Self {
        let tick_nanos = nanos(tick).max(1);
        Ticks { origin, tick_nanos }
    }

    pub(crate) fn tick(&self) -> Duration {
        Duration::from_nanos(self.tick_nanos)
    }

    /// The first tick whose boundary is at or after `deadline`.
    pub(crate) fn deadline_tick(&self, deadline: Instant) -> u64 {
        let nanos = nanos(deadline.saturating_duration_since(self.origin));
        self.ceil_ticks(nanos)
    }

    /// The deadline tick of `now + delay`, saturating.
    pub(crate) fn delay_tick(&self, now: Instant, delay: Duration) -> u64 {
        let since_origin = nanos(now.saturating_duration_since(self.origin));
        match since_origin.checked_add(nanos(delay)) {
            Some(total) if total < u64::MAX => self.ceil_ticks(total),
            _ => NEVER,
        }
    }

    /// The last tick boundary at or before `now`.
    pub(crate) fn elapsed_tick(&self, now: Instant) -> u64 {
        nanos(now.saturating_duration_since(self.origin)) / self.tick_nanos
    }

    fn ceil_ticks(&self, nanos: u64) -> u64 {
        if nanos == u64::MAX {
            return NEVER;
        }
        nanos.div_ceil(self.tick_nanos)
    }

    /// The instant of a tick boundary, or `None` for [`NEVER`] and past the range of `Instant`.
    pub(crate) fn instant_of(&self, tick: u64) -> Option<Instant> {
        if tick == NEVER {
            return None;
        }
        let nanos = u128::from(tick) * u128::from(self.tick_nanos);
        let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
        let offset = Duration::new(secs, (nanos % 1_000_000_000) as u32);
        self.origin.checked_add(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up_and_now_rounds_down() {
        let origin = Instant::now();
        let ticks = Ticks::new(origin, Duration::from_millis(10));
        assert_eq!(ticks.deadline_tick(origin), 0);
        assert_eq!(ticks.deadline_tick(origin + Duration::from_nanos(1)), 1);
        assert_eq!(ticks.deadline_tick(origin + Duration::from_millis(10)), 1);
        assert_eq!(ticks.deadline_tick(origin + Duration::from_millis(11)), 2);
        assert_eq!(ticks.elapsed_tick(origin + Duration::from_millis(19)), 1);
        assert_eq!(ticks.elapsed_tick(origin + Duration::from_millis(20)), 2);
    }

    #[test]
    fn a_due_tick_is_never_before_its_deadline() {
        let origin = Instant::now();
        let ticks = Ticks::new(origin, Duration::from_micros(1_700));
        for nanos in (0..50_000_000u64).step_by(333_331) {
            let deadline = origin + Duration::from_nanos(nanos);
            let tick = ticks.deadline_tick(deadline);
            let boundary = ticks.instant_of(tick).expect("in range");
            assert!(boundary >= deadline);
            assert!(boundary - deadline < ticks.tick());
            assert!(ticks.elapsed_tick(boundary) >= tick);
        }
    }

    #[test]
    fn huge_delays_saturate() {
        let origin = Instant::now();
        let ticks = Ticks::new(origin, Duration::from_millis(1));
        assert_eq!(ticks.delay_tick(origin, Duration::MAX), NEVER);
        assert_eq!(ticks.instant_of(NEVER), None);
        assert!(ticks.delay_tick(origin, Duration::from_secs(u64::MAX / 2)) > 1 << 40);
    }
}
