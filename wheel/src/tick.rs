//! The one place where `Instant`s become ticks and back.
//!
//! A deadline rounds *up* to the next tick boundary and the current time rounds *down*, so a task is
//! handed out only once its tick boundary, and therefore its deadline, has passed: never early.
//! Anything past the range of `u64` ticks or of `Instant` saturates to [`NEVER`].

use std::time::{Duration, Instant};

/// A tick that is never reached.
pub(crate) const NEVER: u64 = u64::MAX;

/// A duration in nanoseconds, saturating at `u64::MAX` (about 584 years), which means "never".
#[inline]
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticks {
    origin: Instant,
    /// The origin in nanoseconds since the epoch of the cheap reading (`fast_now.rs`), for
    /// timers on the monotonic clock; 0 otherwise.
    origin_since_epoch: u64,
    tick_nanos: u64,
    /// `u64::MAX / tick_nanos`: dividing by the tick is a multiplication by it and a correction
    /// (a 64-bit division costs about ten times as much, on every schedule).
    reciprocal: u64,
}

impl Ticks {
    pub(crate) fn new(origin: Instant, tick: Duration) -> Self {
        let tick_nanos = nanos(tick).max(1);
        Ticks {
            origin,
            origin_since_epoch: 0,
            tick_nanos,
            reciprocal: u64::MAX / tick_nanos,
        }
    }

    /// The same ticks, for readings counted in nanoseconds from `epoch`, which must not be
    /// after the origin.
    pub(crate) fn counted_from(mut self, epoch: Instant) -> Self {
        self.origin_since_epoch = nanos(self.origin.saturating_duration_since(epoch));
        self
    }

    /// The deadline tick of `now + delay`, `now` in nanoseconds since the epoch given to
    /// [`Ticks::counted_from`]; saturating.
    #[inline]
    pub(crate) fn delay_tick_since_epoch(&self, now: u64, delay: Duration) -> u64 {
        let since_origin = now.saturating_sub(self.origin_since_epoch);
        match since_origin.checked_add(nanos(delay)) {
            Some(total) if total < u64::MAX => self.ceil_ticks(total),
            _ => NEVER,
        }
    }

    /// `nanos / tick_nanos`, rounded down. The product with the reciprocal falls short of the
    /// quotient by less than two, so at most two corrections follow.
    #[inline]
    fn whole_ticks(&self, nanos: u64) -> u64 {
        let mut quotient = ((u128::from(nanos) * u128::from(self.reciprocal)) >> 64) as u64;
        while nanos - quotient * self.tick_nanos >= self.tick_nanos {
            quotient += 1;
        }
        quotient
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
    #[inline]
    pub(crate) fn delay_tick(&self, now: Instant, delay: Duration) -> u64 {
        let since_origin = nanos(now.saturating_duration_since(self.origin));
        match since_origin.checked_add(nanos(delay)) {
            Some(total) if total < u64::MAX => self.ceil_ticks(total),
            _ => NEVER,
        }
    }

    /// The last tick boundary at or before `now`.
    pub(crate) fn elapsed_tick(&self, now: Instant) -> u64 {
        self.whole_ticks(nanos(now.saturating_duration_since(self.origin)))
    }

    #[inline]
    fn ceil_ticks(&self, nanos: u64) -> u64 {
        if nanos == u64::MAX {
            return NEVER;
        }
        let whole = self.whole_ticks(nanos);
        whole + u64::from(whole * self.tick_nanos < nanos)
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
    fn division_by_the_reciprocal_is_exact() {
        let ticks_of =
            |tick_nanos: u64| Ticks::new(Instant::now(), Duration::from_nanos(tick_nanos));
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for tick_nanos in [
            1,
            3,
            999_999,
            1_000_000,
            1_700_000,
            100_000_000,
            u64::MAX / 3,
            u64::MAX,
        ] {
            let ticks = ticks_of(tick_nanos);
            let edges = [
                0,
                1,
                tick_nanos - 1,
                tick_nanos,
                tick_nanos.saturating_add(1),
                u64::MAX - 1,
            ];
            for nanos in edges.into_iter().chain((0..20_000).map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state >> (state % 64)
            })) {
                assert_eq!(
                    ticks.whole_ticks(nanos),
                    nanos / tick_nanos,
                    "{nanos} / {tick_nanos}"
                );
                let ceil = if nanos == u64::MAX {
                    NEVER
                } else {
                    nanos.div_ceil(tick_nanos)
                };
                assert_eq!(ticks.ceil_ticks(nanos), ceil, "{nanos} / {tick_nanos}");
            }
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
