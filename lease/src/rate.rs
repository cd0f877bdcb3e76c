//! What a rate limiter counts by ([`RateLimit`], stored with it), what one grant is
//! ([`Granted`]) and what the store holds for a limiter ([`LimiterState`]): the values a
//! [`RateLimiter`](crate::RateLimiter) and the stores that keep its grants exchange.

use crate::error::{Error, Result};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The largest limit of a sliding window: every grant in the window is a record in the store,
/// so its memory and each call's time grow with the limit. Above it, a cell rate keeps one
/// number whatever the rate ([`RateLimit::CellRate`]).
pub const MAX_WINDOW_LIMIT: u64 = 100_000;

/// The largest burst of a cell rate.
pub const MAX_BURST: u64 = 1_000_000_000;

/// The shortest window or period: a millisecond.
const MIN_SPAN: Duration = Duration::from_millis(1);

/// The longest window or period, and the longest span of a cell rate's burst: a year, well
/// inside what the stores' whole microseconds hold exactly.
const MAX_SPAN: Duration = Duration::from_secs(365 * 24 * 3600);

/// What a rate limiter never exceeds, stored with the limiter in its store: every handle
/// declares one, and a handle declaring another than the one stored is refused while the
/// limiter's grants stand (see [`RateLimiter`](crate::RateLimiter)). Times are the store's
/// clock's, in whole microseconds (a window or period is cut to them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateLimit {
    /// A sliding log, exact: at most `limit` grants in *any* window of length `window` (every
    /// half-open interval of that length, wherever it starts), each grant a record the store
    /// keeps for one window. `limit` from 1 to [`MAX_WINDOW_LIMIT`], `window` from 1 ms to a
    /// year.
    Window {
        /// The most grants in any window.
        limit: u64,
        /// The window's length.
        window: Duration,
    },
    /// A generic cell rate algorithm (GCRA, the leaky bucket as a meter): one number per
    /// limiter whatever the rate. `rate` grants per `period` on average, `burst` at most at
    /// once; each grant moves a theoretical arrival time on by `period / rate`, and a grant is
    /// refused while that time would run more than `burst × period / rate` ahead of the store's
    /// clock. Its guarantee is weaker than a window's: at most `burst - 1 + ⌈d × rate /
    /// period⌉` grants in any window of length `d` ([`RateLimit::at_most`]), so up to `rate +
    /// burst - 1` in one period (a window's `limit` and no more needs `burst` 1, which spaces
    /// the grants at least `period / rate` apart). `rate` from 1 to one per microsecond of the
    /// period, `period` from 1 ms to a year, `burst` from 1 to [`MAX_BURST`] spanning at most a
    /// year (`burst × period / rate`).
    CellRate {
        /// The grants per period, on average.
        rate: u64,
        /// The period.
        period: Duration,
        /// The most grants at once.
        burst: u64,
    },
}

impl RateLimit {
    /// A sliding window: at most `limit` grants in any window of length `window`.
    pub fn window(limit: u64, window: Duration) -> RateLimit {
        RateLimit::Window { limit, window }
    }

    /// A cell rate: `rate` grants per `period` on average, `burst` at most at once.
    pub fn cell_rate(rate: u64, period: Duration, burst: u64) -> RateLimit {
        RateLimit::CellRate {
            rate,
            period,
            burst,
        }
    }

    /// The most grants one call may ask for: the window's limit, or the cell rate's burst.
    pub fn most_at_once(&self) -> u64 {
        match *self {
            RateLimit::Window { limit, .. } => limit,
            RateLimit::CellRate { burst, .. } => burst,
        }
    }

    /// The most grants the limiter ever makes in any window of length `within` of the store's
    /// clock (0 for an empty one): `limit × ⌈within / window⌉` for a sliding window,
    /// `burst - 1 + ⌈within × rate / period⌉` for a cell rate. The guarantee holds while the
    /// limit stays stored and the store keeps what it was told (see the guarantees, "A rate
    /// limiter").
    pub fn at_most(&self, within: Duration) -> u64 {
        if within.is_zero() {
            return 0;
        }
        let within = within.as_micros();
        let most = match *self {
            RateLimit::Window { limit, window } => {
                u128::from(limit) * within.div_ceil(window.as_micros().max(1))
            }
            RateLimit::CellRate {
                rate,
                period,
                burst,
            } => {
                let cells = (within * u128::from(rate)).div_ceil(period.as_micros().max(1));
                u128::from(burst) - 1 + cells
            }
        };
        u64::try_from(most).unwrap_or(u64::MAX)
    }

    /// The limit as the stores keep it: checked, its durations cut to whole microseconds.
    pub(crate) fn checked(self) -> Result<RateLimit> {
        match self {
            RateLimit::Window { limit, window } => {
                if limit == 0 || limit > MAX_WINDOW_LIMIT {
                    return Err(Error::InvalidArgument(format!(
                        "a rate limiter's window holds from 1 to {MAX_WINDOW_LIMIT} grants, not \
                         {limit} (a cell rate has no such bound)"
                    )));
                }
                Ok(RateLimit::Window {
                    limit,
                    window: span("window", window)?,
                })
            }
            RateLimit::CellRate {
                rate,
                period,
                burst,
            } => {
                let period = span("period", period)?;
                let micros = period.as_micros();
                if rate == 0 || u128::from(rate) > micros {
                    return Err(Error::InvalidArgument(format!(
                        "a cell rate's rate is from 1 to one grant per microsecond of its period \
                         ({micros} per {period:?}), not {rate}"
                    )));
                }
                if burst == 0 || burst > MAX_BURST {
                    return Err(Error::InvalidArgument(format!(
                        "a cell rate's burst is from 1 to {MAX_BURST}, not {burst}"
                    )));
                }
                let spans = u128::from(burst) * micros.div_ceil(u128::from(rate));
                if spans > MAX_SPAN.as_micros() {
                    return Err(Error::InvalidArgument(format!(
                        "a cell rate's burst spans at most a year (burst x period / rate), not \
                         {burst} x {period:?} / {rate}"
                    )));
                }
                Ok(RateLimit::CellRate {
                    rate,
                    period,
                    burst,
                })
            }
        }
    }

    /// Checks that one call may ask for `n` grants under this limit.
    pub(crate) fn check_ask(&self, n: u64) -> Result<()> {
        let most = self.most_at_once();
        if n == 0 || n > most {
            let what = match self {
                RateLimit::Window { .. } => "limit",
                RateLimit::CellRate { .. } => "burst",
            };
            return Err(Error::InvalidArgument(format!(
                "a call asks for from 1 to the rate limiter's {what} of {most} grants, not {n}: \
                 more could never be granted at once"
            )));
        }
        Ok(())
    }

    /// The limit as its store's calls send it: its mode, and its three numbers (a window's
    /// limit, length in microseconds and 0; a cell rate's rate, period in microseconds and
    /// burst).
    pub(crate) fn wire(&self) -> (&'static str, [u64; 3]) {
        match *self {
            RateLimit::Window { limit, window } => ("window", [limit, micros(window), 0]),
            RateLimit::CellRate {
                rate,
                period,
                burst,
            } => ("cell", [rate, micros(period), burst]),
        }
    }

    /// The limit a store sent back in its wire form, if it is one.
    pub(crate) fn from_wire(mode: &str, numbers: [u64; 3]) -> Option<RateLimit> {
        let [a, b, c] = numbers;
        match mode {
            "window" => Some(RateLimit::Window {
                limit: a,
                window: Duration::from_micros(b),
            }),
            "cell" => Some(RateLimit::CellRate {
                rate: a,
                period: Duration::from_micros(b),
                burst: c,
            }),
            _ => None,
        }
    }
}

impl std::fmt::Display for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RateLimit::Window { limit, window } => write!(f, "{limit} per {window:?} window"),
            RateLimit::CellRate {
                rate,
                period,
                burst,
            } => write!(f, "{rate} per {period:?}, burst {burst}"),
        }
    }
}

/// `duration` as a window or period, cut to whole microseconds: from 1 ms to a year.
fn span(what: &str, duration: Duration) -> Result<Duration> {
    let cut = Duration::from_micros(micros(duration));
    if !(MIN_SPAN..=MAX_SPAN).contains(&cut) {
        return Err(Error::InvalidArgument(format!(
            "a rate limiter's {what} is from 1 ms to a year, not {duration:?}"
        )));
    }
    Ok(cut)
}

/// `duration` in whole microseconds.
fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// The refusal of a reconfiguration to `declared` of the limiter `name`, whose stored limit
/// `stored` is of the other mode and whose grants still count.
pub(crate) fn other_mode(name: &str, stored: &RateLimit, declared: &RateLimit) -> Error {
    Error::InvalidArgument(format!(
        "rate limiter {name:?} stores {stored}, whose grants still count: {declared} is of the \
         other mode, which keeps other records, and may replace it only once none counts"
    ))
}

/// The refusal of a call declaring `declared` to the limiter `name`, which stores `stored`.
pub(crate) fn declared_other(name: &str, stored: &RateLimit, declared: &RateLimit) -> Error {
    Error::InvalidArgument(format!(
        "rate limiter {name:?} stores {stored}, and this handle declared {declared}: nothing \
         was taken (store this handle's limit with reconfigure, or declare the stored one)"
    ))
}

/// An instant of the store's clock, given in microseconds since the Unix epoch.
pub(crate) fn store_time(micros: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(micros)
}

/// Grants a rate limiter made, spent when made: there is nothing to give back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted {
    count: u64,
    at: SystemTime,
    available: u64,
}

impl Granted {
    pub(crate) fn new(count: u64, at: SystemTime, available: u64) -> Granted {
        Granted {
            count,
            at,
            available,
        }
    }

    /// How many grants were made.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// When the store made them, on its own clock: the instant they count from.
    pub fn granted_at(&self) -> SystemTime {
        self.at
    }

    /// The grants left to take at that instant.
    pub fn available(&self) -> u64 {
        self.available
    }
}

/// A rate limiter as its store holds it, from
/// [`RateLimiter::inspect`](crate::RateLimiter::inspect).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LimiterState {
    /// The limiter's name.
    pub name: String,
    /// The server that answered (a cluster's master of the limiter's slot), password hidden;
    /// `None` where the store does not say.
    pub node: Option<String>,
    /// The limit stored with the limiter, if one is (none while it has no grant standing and
    /// was not reconfigured within its window).
    pub limit: Option<RateLimit>,
    /// The grants that count now: a window's grants within the window; a cell rate's cells
    /// still ahead of the clock, rounded up.
    pub used: u64,
    /// The grants a call could take now, by the stored limit (or the asking handle's, if none
    /// is stored).
    pub available: u64,
    /// How long until one grant could be taken, when none can now.
    pub next_in: Option<Duration>,
    /// The store's clock when it answered.
    pub now: SystemTime,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_bounds_every_window_and_a_cell_rate_its_burst_and_rate() {
        let window = RateLimit::window(10, Duration::from_secs(1));
        assert_eq!(window.at_most(Duration::from_millis(1)), 10);
        assert_eq!(window.at_most(Duration::from_secs(1)), 10);
        assert_eq!(window.at_most(Duration::from_millis(1001)), 20);
        assert_eq!(window.at_most(Duration::ZERO), 0);
        let cell = RateLimit::cell_rate(10, Duration::from_secs(1), 3);
        // A full bucket at the window's start, then one grant every 100 ms.
        assert_eq!(cell.at_most(Duration::from_millis(1)), 3);
        assert_eq!(cell.at_most(Duration::from_millis(100)), 3);
        assert_eq!(cell.at_most(Duration::from_millis(101)), 4);
        assert_eq!(cell.at_most(Duration::from_secs(1)), 12);
        let spaced = RateLimit::cell_rate(10, Duration::from_secs(1), 1);
        assert_eq!(spaced.at_most(Duration::from_secs(1)), 10);
    }

    #[test]
    fn limits_out_of_range_are_refused_and_spans_cut_to_microseconds() {
        for limit in [
            RateLimit::window(0, Duration::from_secs(1)),
            RateLimit::window(MAX_WINDOW_LIMIT + 1, Duration::from_secs(1)),
            RateLimit::window(1, Duration::from_micros(999)),
            RateLimit::window(1, MAX_SPAN + Duration::from_secs(1)),
            RateLimit::cell_rate(0, Duration::from_secs(1), 1),
            RateLimit::cell_rate(1_000_001, Duration::from_secs(1), 1),
            RateLimit::cell_rate(1, Duration::from_secs(1), 0),
            RateLimit::cell_rate(1, Duration::from_secs(1), MAX_BURST + 1),
            RateLimit::cell_rate(1, Duration::from_secs(86_400), 400),
        ] {
            assert!(
                matches!(limit.checked(), Err(Error::InvalidArgument(_))),
                "{limit:?}"
            );
        }
        let cut = RateLimit::window(5, Duration::from_nanos(2_000_999)).checked();
        assert_eq!(
            cut.expect("valid"),
            RateLimit::window(5, Duration::from_micros(2_000))
        );
        let cell = RateLimit::cell_rate(1_000_000, Duration::from_secs(1), MAX_BURST);
        assert!(cell.checked().is_ok());
    }

    #[test]
    fn asks_beyond_what_could_ever_be_granted_are_refused() {
        let window = RateLimit::window(3, Duration::from_secs(1));
        assert!(window.check_ask(3).is_ok());
        for n in [0, 4] {
            assert!(matches!(
                window.check_ask(n),
                Err(Error::InvalidArgument(_))
            ));
        }
        let cell = RateLimit::cell_rate(100, Duration::from_secs(1), 5);
        assert!(cell.check_ask(5).is_ok() && cell.check_ask(6).is_err());
    }

    #[test]
    fn the_wire_form_reads_back_as_the_limit() {
        for limit in [
            RateLimit::window(7, Duration::from_millis(1500)),
            RateLimit::cell_rate(9, Duration::from_secs(60), 2),
        ] {
            let (mode, numbers) = limit.wire();
            assert_eq!(RateLimit::from_wire(mode, numbers), Some(limit));
        }
        assert_eq!(RateLimit::from_wire("other", [1, 2, 3]), None);
    }
}
