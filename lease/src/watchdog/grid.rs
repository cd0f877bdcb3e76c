//! The watchdog's arithmetic of time: until when a hold is valid, when its lease is renewed, and
//! when a failed renewal is tried again. Pure: no clock is read, no timer or thread is touched.
//!
//! A hold's local deadline is `sent + lease - drift`, where `sent` is when the acquisition or the
//! last *confirmed* renewal was sent, floored to a tick boundary of the timer: the timer rounds a
//! deadline up to a boundary, so a deadline on one is fired at, not a tick later, and the holder
//! is told before its lease can have lapsed.
//!
//! Renewals happen in rounds: the renewal of a lease falls on a grid of `lease / 3` steps from
//! the watchdog's origin (the next grid point at or before a third of the lease after the last
//! renewal was sent), so that every lease of the same length is renewed in the same round. A
//! lease's first renewal therefore comes up to a third of the lease early; the following ones
//! come every third of the lease. A failed call is retried a tenth of the lease later, on a finer
//! grid of `lease / 30`, so that the leases of one failed call are retried together. No grid is
//! finer than a tick.

use std::time::{Duration, Instant};

/// The safety margin taken off every lease: clocks of client and server may run at slightly
/// different rates, and the lease starts on the server after the command was sent.
fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// Until when a lease whose command was sent at `sent` is known to be valid: `sent + lease -
/// drift`, or the clock's last instant where that is past it.
pub(crate) fn valid_until(sent: Instant, lease: Duration) -> Instant {
    saturating_add(sent, lease.saturating_sub(drift(lease)))
}

/// `from + by`, or the clock's last instant where that is past it: never later than `from + by`.
fn saturating_add(from: Instant, by: Duration) -> Instant {
    if let Some(at) = from.checked_add(by) {
        return at;
    }
    let (mut at, mut left, mut step) = (from, by, by);
    while !step.is_zero() {
        match at.checked_add(step) {
            Some(later) => {
                at = later;
                left -= step;
                step = left;
            }
            None => step /= 2,
        }
    }
    at
}

/// The renewal grid of one watchdog and the tick grid of its timer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Grid {
    /// The origin of the renewal and retry grids.
    origin: Instant,
    /// A tick boundary of the timer: every boundary is this plus a whole number of ticks.
    tick_boundary: Instant,
    /// The timer's tick, at least a nanosecond.
    tick: Duration,
}

impl Grid {
    /// The grid of a watchdog started at `origin` on a timer of `tick` that has a tick boundary at
    /// `tick_boundary`.
    pub(super) fn new(origin: Instant, tick_boundary: Instant, tick: Duration) -> Grid {
        Grid {
            origin,
            tick_boundary,
            tick: tick.max(Duration::from_nanos(1)),
        }
    }

    /// Until when a lease sent at `sent` is known to be valid: [`valid_until`], floored to a
    /// tick boundary.
    pub(super) fn deadline_after(&self, sent: Instant, lease: Duration) -> Instant {
        self.tick_floor(valid_until(sent, lease))
    }

    /// When a lease confirmed as sent at `sent` is next renewed: the round at or before a third
    /// of the lease later.
    pub(super) fn renewal_after(&self, sent: Instant, lease: Duration) -> Instant {
        self.on_grid(saturating_add(sent, lease / 3), lease / 3)
            .max(sent)
    }

    /// When a renewal that failed at `now` is tried again: a tenth of the lease later, on a grid
    /// of a thirtieth of the lease, so that the leases of one failed call are retried together.
    pub(super) fn retry_after(&self, now: Instant, lease: Duration) -> Instant {
        self.on_grid(saturating_add(now, lease / 10), lease / 30)
            .max(now)
    }

    /// `at`, floored to a grid of `step` (at least a tick) from the origin.
    fn on_grid(&self, at: Instant, step: Duration) -> Instant {
        floor_to(at, self.origin, step.max(self.tick))
    }

    /// The last tick boundary at or before `at`.
    fn tick_floor(&self, at: Instant) -> Instant {
        floor_to(at, self.tick_boundary, self.tick)
    }
}

/// The last point of the grid `origin + k * step` (`k` any whole number, `step` at least a
/// nanosecond) at or before `at`; `at` itself where that point is past the clock's range.
fn floor_to(at: Instant, origin: Instant, step: Duration) -> Instant {
    let step = step.as_nanos().max(1);
    let point = match at.checked_duration_since(origin) {
        Some(after) => {
            let after = after.as_nanos();
            origin.checked_add(duration_of(after - after % step))
        }
        None => {
            let before = origin.saturating_duration_since(at).as_nanos();
            origin.checked_sub(duration_of(before.div_ceil(step).saturating_mul(step)))
        }
    };
    point.unwrap_or(at)
}

/// `nanos` nanoseconds as a duration, saturating at [`Duration::MAX`].
fn duration_of(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    match u64::try_from(nanos / NANOS_PER_SEC) {
        Ok(secs) => Duration::new(secs, (nanos % NANOS_PER_SEC) as u32),
        Err(_) => Duration::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leases from the shortest a client takes to the longest.
    const LEASES: [Duration; 7] = [
        Duration::from_millis(10),
        Duration::from_millis(11),
        Duration::from_millis(31),
        Duration::from_secs(1),
        Duration::from_millis(7_777),
        Duration::from_secs(30),
        Duration::from_secs(365 * 24 * 3600),
    ];

    /// Ticks from the timer's shortest to a coarse shared timer's.
    const TICKS: [Duration; 5] = [
        Duration::from_millis(1),
        Duration::from_micros(1_700),
        Duration::from_millis(10),
        Duration::from_millis(100),
        Duration::from_secs(1),
    ];

    /// A watchdog's grid on a timer of `tick` that started a little before it, off its
    /// boundaries.
    fn grid(tick: Duration) -> Grid {
        let origin = Instant::now() + Duration::from_secs(3600);
        Grid::new(origin, origin - tick * 2 / 3, tick)
    }

    /// Send times over a few leases from the origin, at odd offsets.
    fn sends(grid: &Grid, lease: Duration) -> impl Iterator<Item = Instant> + '_ {
        (0..40u32).map(move |step| grid.origin + lease * step / 13 + Duration::from_nanos(7_919))
    }

    fn is_tick_boundary(grid: &Grid, at: Instant) -> bool {
        let since = at.duration_since(grid.tick_boundary).as_nanos();
        since.is_multiple_of(grid.tick.as_nanos())
    }

    #[test]
    fn the_cadence_in_figures() {
        let origin = Instant::now() + Duration::from_secs(3600);
        let grid = Grid::new(
            origin,
            origin - Duration::from_micros(300),
            Duration::from_millis(1),
        );
        let at = |ms: u64, micros: u64| {
            origin + Duration::from_millis(ms) + Duration::from_micros(micros)
        };
        let lease = Duration::from_secs(30);
        // 30 s less 1% and 2 ms, floored to a boundary (origin - 0.3 ms + whole milliseconds).
        assert_eq!(grid.deadline_after(at(12_000, 500), lease), at(41_697, 700));
        assert_eq!(grid.deadline_after(at(12_000, 200), lease), at(41_697, 700));
        assert_eq!(grid.deadline_after(at(11_999, 600), lease), at(41_696, 700));
        // Renewed in rounds of 10 s from the origin.
        assert_eq!(grid.renewal_after(at(0, 0), lease), at(10_000, 0));
        assert_eq!(grid.renewal_after(at(12_000, 500), lease), at(20_000, 0));
        assert_eq!(grid.renewal_after(at(19_999, 999), lease), at(20_000, 0));
        assert_eq!(grid.renewal_after(at(20_000, 0), lease), at(30_000, 0));
        // Retried 3 s later, on a grid of 1 s.
        assert_eq!(grid.retry_after(at(20_200, 0), lease), at(23_000, 0));
        assert_eq!(grid.retry_after(at(20_999, 999), lease), at(23_000, 0));
    }

    #[test]
    fn a_deadline_is_never_later_than_the_lease_allows() {
        for tick in TICKS {
            let grid = grid(tick);
            for lease in LEASES {
                for sent in sends(&grid, lease) {
                    let allowed = sent + lease - drift(lease);
                    let deadline = grid.deadline_after(sent, lease);
                    assert!(deadline <= allowed, "{lease:?} on {tick:?}: late");
                    assert!(
                        allowed - deadline < tick,
                        "{lease:?} on {tick:?}: a tick early"
                    );
                    assert!(is_tick_boundary(&grid, deadline), "{lease:?} on {tick:?}");
                }
            }
        }
    }

    #[test]
    fn a_lease_shorter_than_a_few_ticks_still_ends_in_time() {
        for tick in [4, 7, 10, 30, 1_000].map(Duration::from_millis) {
            let grid = grid(tick);
            for lease in [10, 11, 25].map(Duration::from_millis) {
                for sent in sends(&grid, lease) {
                    let deadline = grid.deadline_after(sent, lease);
                    assert!(
                        deadline <= sent + lease - drift(lease),
                        "{lease:?} on {tick:?}"
                    );
                    assert!(is_tick_boundary(&grid, deadline), "{lease:?} on {tick:?}");
                }
            }
        }
    }

    /// Holds wherever a tick fits between a third of the lease and its end less the drift, which
    /// covers every lease a client takes on a timer of the default tick (1 ms).
    #[test]
    fn a_renewal_is_never_due_after_the_local_deadline() {
        for tick in TICKS {
            let grid = grid(tick);
            for lease in LEASES {
                if tick + lease / 3 > lease - drift(lease) {
                    continue;
                }
                for sent in sends(&grid, lease) {
                    let renewal = grid.renewal_after(sent, lease);
                    assert!(sent <= renewal, "{lease:?} on {tick:?}: before it was sent");
                    assert!(
                        renewal <= grid.deadline_after(sent, lease),
                        "{lease:?} on {tick:?}: after the deadline"
                    );
                }
            }
        }
    }

    #[test]
    fn leases_sent_in_one_round_are_renewed_in_the_next() {
        for tick in TICKS {
            let grid = grid(tick);
            for lease in LEASES {
                let third = lease / 3;
                if third < tick {
                    continue;
                }
                for round in [0u32, 1, 2, 7] {
                    let start = grid.origin + third * round;
                    let next = start + third;
                    for offset in [Duration::ZERO, Duration::from_nanos(1), third / 2] {
                        assert_eq!(grid.renewal_after(start + offset, lease), next);
                    }
                    let last = next - Duration::from_nanos(1);
                    assert_eq!(
                        grid.renewal_after(last, lease),
                        next,
                        "{lease:?} on {tick:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_retries_of_one_failed_batch_land_on_one_grid_point() {
        for tick in TICKS {
            let grid = grid(tick);
            for lease in LEASES {
                let step = (lease / 30).max(tick);
                for cell in [4u32, 5, 31] {
                    let point = grid.origin + step * cell;
                    // Calls that failed while `now + lease / 10` stayed in one cell of the grid.
                    let first = point - lease / 10;
                    for offset in [Duration::ZERO, Duration::from_nanos(1), step / 2] {
                        let now = first + offset;
                        let retry = grid.retry_after(now, lease);
                        assert!(now <= retry, "{lease:?} on {tick:?}: before the failure");
                        assert!(retry <= now + lease / 10, "{lease:?} on {tick:?}: late");
                        if step == lease / 30 {
                            // Not coarsened by the tick: one point for the whole cell.
                            assert_eq!(retry, point, "{lease:?} on {tick:?}");
                        }
                    }
                }
            }
        }
    }

    /// The last instant the clock can represent.
    fn end_of_clock(from: Instant) -> Instant {
        let (mut at, mut step) = (from, Duration::MAX);
        while !step.is_zero() {
            match at.checked_add(step) {
                Some(later) => at = later,
                None => step /= 2,
            }
        }
        assert!(at.checked_add(Duration::from_nanos(1)).is_none());
        at
    }

    #[test]
    fn huge_leases_and_instants_near_the_clock_s_range_saturate() {
        let huge = [Duration::from_secs(u64::MAX / 3), Duration::MAX];
        for tick in TICKS {
            let grid = grid(tick);
            let end = end_of_clock(grid.origin);
            for lease in LEASES.into_iter().chain(huge) {
                let near_end = [lease / 2, Duration::from_millis(1), Duration::ZERO]
                    .map(|before| end.checked_sub(before).unwrap_or(grid.origin));
                for sent in [grid.origin].into_iter().chain(near_end) {
                    let after = |by: Duration| sent.checked_add(by).unwrap_or(end);
                    let allowed = after(lease - drift(lease));
                    assert_eq!(valid_until(sent, lease), allowed, "{lease:?} on {tick:?}");
                    let deadline = grid.deadline_after(sent, lease);
                    assert!(deadline <= allowed && allowed - deadline < tick);
                    let renewal = grid.renewal_after(sent, lease);
                    assert!(sent <= renewal && renewal <= after(lease / 3));
                    let retry = grid.retry_after(sent, lease);
                    assert!(sent <= retry && retry <= after(lease / 10));
                }
            }
        }
    }

    /// Past 2^64 nanoseconds (about 584 years) from the origin, which a manual clock reaches.
    #[test]
    fn renewals_keep_their_rounds_far_from_the_origin() {
        let years = |n: u64| Duration::from_secs(n * 365 * 24 * 3600);
        let on_grid = |grid: &Grid, at: Instant, step: Duration| {
            at.duration_since(grid.origin)
                .as_nanos()
                .is_multiple_of(step.as_nanos())
        };
        for tick in TICKS {
            let grid = grid(tick);
            for lease in LEASES {
                for far in [years(585), years(1_000), years(1_000_000)] {
                    let sent = grid.origin + far + Duration::from_nanos(7_919);
                    if lease / 3 >= tick {
                        let renewal = grid.renewal_after(sent, lease);
                        assert!(sent < renewal && renewal <= sent + lease / 3, "{lease:?}");
                        assert!(on_grid(&grid, renewal, lease / 3), "{lease:?} on {tick:?}");
                    }
                    if lease / 30 >= tick {
                        let retry = grid.retry_after(sent, lease);
                        assert!(sent < retry && retry <= sent + lease / 10, "{lease:?}");
                        assert!(on_grid(&grid, retry, lease / 30), "{lease:?} on {tick:?}");
                    }
                }
            }
        }
    }
}
