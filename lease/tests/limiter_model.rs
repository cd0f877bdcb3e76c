//! The rate limiter against a reference model: random sequences of grants, clock steps,
//! declarations of other limits and reconfigurations, each outcome the one the model predicts,
//! and the grants' own times keeping the limit.
//!
//! On PostgreSQL the test sets the store's clock itself (libfaketime): every step is exact, and
//! the clock steps back as well as forward. Redis cannot run under libfaketime (its allocator
//! reads the clock while libfaketime starts), so on Redis the store's clock is the host's and
//! runs on: each outcome is checked against the model's at the times before and after its
//! call, and where a boundary falls between them (a grant leaving the window, the limiter
//! lapsing) the outcome observed is taken, and must be one of the two.

// What only the PostgreSQL half uses goes unused without its feature.
#![cfg_attr(not(feature = "postgres"), allow(unused_imports, dead_code))]

mod common;

use common::RedisServer;
use proptest::prelude::*;
use redis_lease::{Client, Error, RateLimit, RateLimiter};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a take came to, as the API tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Granted { available: u64 },
    Refused,
    Declared(RateLimit),
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).expect("a short duration")
}

fn at_micros(at: SystemTime) -> u64 {
    micros(at.duration_since(UNIX_EPOCH).expect("after the epoch"))
}

/// What a store keeps for one limiter, and how it judges: a stored limit with the time it
/// lapses, a window's grants, a cell rate's arrival time, and the time of the last grant, before
/// which the store's clock never reads.
#[derive(Debug, Clone, Default)]
struct Model {
    stored: Option<RateLimit>,
    lapses: u64,
    log: Vec<(u64, u64)>,
    tat: u64,
    last: u64,
}

/// A window's grants of at most `limit`... in microseconds: its limit and length; a cell
/// rate's interval and the span of its burst.
enum Rule {
    Window { limit: u64, window: u64 },
    Cell { interval: u64, span: u64 },
}

fn rule(limit: RateLimit) -> Rule {
    match limit {
        RateLimit::Window { limit, window } => Rule::Window {
            limit,
            window: micros(window),
        },
        RateLimit::CellRate {
            rate,
            period,
            burst,
        } => {
            let interval = micros(period).div_ceil(rate);
            Rule::Cell {
                interval,
                span: burst * interval,
            }
        }
    }
}

fn span_of(limit: RateLimit) -> u64 {
    match limit {
        RateLimit::Window { window, .. } => micros(window),
        RateLimit::CellRate { period, .. } => micros(period),
    }
}

fn same_mode(a: RateLimit, b: RateLimit) -> bool {
    matches!(
        (a, b),
        (RateLimit::Window { .. }, RateLimit::Window { .. })
            | (RateLimit::CellRate { .. }, RateLimit::CellRate { .. })
    )
}

impl Model {
    /// The store's clock reading `clock`, never before the last grant.
    fn now(&self, clock: u64) -> u64 {
        clock.max(self.last)
    }

    fn live(&self, now: u64) -> bool {
        self.stored.is_some() && self.lapses > now
    }

    /// A take of `n` under `declared` at `clock`; the grant's time if granted. A refusal
    /// writes nothing; a grant deletes what no longer counts (all of a lapsed limiter's).
    fn take(&mut self, clock: u64, declared: RateLimit, n: u64) -> (Outcome, u64) {
        let now = self.now(clock);
        let live = self.live(now);
        if let Some(stored) = self.stored.filter(|_| live) {
            if stored != declared {
                return (Outcome::Declared(stored), now);
            }
        }
        let available = match rule(declared) {
            Rule::Window { limit, window } => {
                let used: u64 = self
                    .log
                    .iter()
                    .filter(|(at, _)| live && at + window > now)
                    .map(|(_, n)| n)
                    .sum();
                if used + n > limit {
                    return (Outcome::Refused, now);
                }
                self.log.retain(|(at, _)| live && at + window > now);
                self.log.push((now, n));
                self.lapses = now + window;
                limit - used - n
            }
            Rule::Cell { interval, span } => {
                let tat = if live { self.tat.max(now) } else { now };
                let after = tat + n * interval;
                if after - now > span {
                    return (Outcome::Refused, now);
                }
                if !live {
                    self.log.clear();
                }
                self.tat = after;
                self.lapses = after;
                (span - (after - now)) / interval
            }
        };
        self.stored = Some(declared);
        self.last = now;
        (Outcome::Granted { available }, now)
    }

    /// A reconfiguration to `declared` at `clock`: the limit stored before, or the refusal's.
    fn reconfigure(
        &mut self,
        clock: u64,
        declared: RateLimit,
    ) -> Result<Option<RateLimit>, RateLimit> {
        let now = self.now(clock);
        let before = self.stored.filter(|_| self.live(now));
        let mut fresh = before.is_none();
        if let Some(stored) = before.filter(|stored| !same_mode(*stored, declared)) {
            let counting = match rule(stored) {
                Rule::Window { window, .. } => self.log.iter().any(|(at, _)| at + window > now),
                Rule::Cell { .. } => self.tat > now,
            };
            if counting {
                return Err(stored);
            }
            fresh = true;
        }
        if fresh {
            self.log.clear();
            self.tat = 0;
        }
        self.stored = Some(declared);
        self.last = now;
        self.lapses = (now + span_of(declared)).max(match declared {
            RateLimit::CellRate { .. } => self.tat,
            RateLimit::Window { .. } => 0,
        });
        Ok(before)
    }

    /// What a read at `clock` finds: the stored limit, the grants that count, those
    /// available, and the microseconds until the next.
    fn look(&self, clock: u64, declared: RateLimit) -> (Option<RateLimit>, u64, u64, Option<u64>) {
        let now = self.now(clock);
        let live = self.live(now);
        let limit = self.stored.filter(|_| live).unwrap_or(declared);
        let (used, available, next) = match rule(limit) {
            Rule::Window { limit, window } => {
                let mut counting: Vec<(u64, u64)> = self
                    .log
                    .iter()
                    .copied()
                    .filter(|(at, _)| live && at + window > now)
                    .collect();
                counting.sort_unstable();
                let used: u64 = counting.iter().map(|(_, n)| n).sum();
                let available = limit.saturating_sub(used);
                let next = (available == 0).then(|| {
                    let mut so_far = 0;
                    let (at, _) = counting
                        .iter()
                        .find(|(_, n)| {
                            so_far += n;
                            so_far > used - limit
                        })
                        .expect("enough grants count");
                    at + window - now
                });
                (used, available, next)
            }
            Rule::Cell { interval, span } => {
                let ahead = if live {
                    self.tat.saturating_sub(now)
                } else {
                    0
                };
                let available = span.saturating_sub(ahead) / interval;
                let next = (available == 0).then(|| ahead + interval - span);
                (ahead.div_ceil(interval), available, next)
            }
        };
        (live.then_some(limit), used, available, next)
    }
}

/// One grant as the store made it, with the limit it was made under and whether a
/// reconfiguration came before it.
#[derive(Debug, Clone, Copy)]
struct Made {
    at: u64,
    n: u64,
    limit: RateLimit,
    epoch: usize,
}

/// The guarantee, on the grants' own times: every window grant is one of at most its limit in
/// the window before it, counting the grants made since the last reconfiguration (before it, a
/// lengthened window counts only what the store still kept); every cell grant keeps its rate's
/// bound with those of the same limit before it.
fn check_made(made: &[Made]) -> Result<(), String> {
    for (i, grant) in made.iter().enumerate() {
        let same = made[..=i]
            .iter()
            .filter(|earlier| earlier.epoch == grant.epoch && earlier.limit == grant.limit);
        match grant.limit {
            RateLimit::Window { limit, window } => {
                let counted: u64 = same
                    .filter(|earlier| earlier.at + micros(window) > grant.at)
                    .map(|earlier| earlier.n)
                    .sum();
                if counted > limit {
                    return Err(format!("{counted} grants in the window before {grant:?}"));
                }
            }
            RateLimit::CellRate { .. } => {
                for earlier in same {
                    let between: u64 = made[..=i]
                        .iter()
                        .filter(|other| {
                            other.epoch == grant.epoch
                                && other.limit == grant.limit
                                && other.at >= earlier.at
                        })
                        .map(|other| other.n)
                        .sum();
                    let most = grant
                        .limit
                        .at_most(Duration::from_micros(grant.at - earlier.at + 1));
                    if between > most {
                        return Err(format!(
                            "{between} grants from {earlier:?} to {grant:?}, above {most}"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum Op {
    /// Take this many grants.
    Take(u64),
    /// The clock moves by this many microseconds (back if negative).
    Step(i64),
    /// The clock moves to where a grant leaves the window (the grant of this index, from the
    /// oldest, of those the model keeps), or where a cell rate lets one more grant in, and this
    /// many microseconds on: the edges where an outcome changes.
    ToEdge(usize, i64),
    /// Every handle declares this limit from now on.
    Declare(RateLimit),
    /// The declared limit is stored.
    Reconfigure,
    /// A read of the limiter.
    Look,
}

fn limit() -> impl Strategy<Value = RateLimit> {
    prop_oneof![
        3 => (1..=4u64, prop::sample::select(vec![1u64, 2, 3]))
            .prop_map(|(limit, tenths)| RateLimit::window(limit, Duration::from_millis(100 * tenths))),
        2 => (1..=4u64, prop::sample::select(vec![1u64, 3]), 1..=3u64)
            .prop_map(|(rate, tenths, burst)| {
                RateLimit::cell_rate(rate, Duration::from_millis(100 * tenths), burst)
            }),
    ]
}

/// Ops whose steps are exact microseconds, forward and back (for a clock the test sets).
fn exact_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1..=4u64).prop_map(Op::Take),
        4 => prop_oneof![
            (0..=6i64).prop_map(|k| k * 25_000),
            prop::sample::select(vec![1i64, 99_999, 100_000, 100_001, 299_999, 300_000]),
            (-60_000..=0i64),
        ]
        .prop_map(Op::Step),
        3 => (0..4usize, -1..=1i64).prop_map(|(index, by)| Op::ToEdge(index, by)),
        1 => limit().prop_map(Op::Declare),
        1 => Just(Op::Reconfigure),
        2 => Just(Op::Look),
    ]
}

impl Model {
    /// The edge `index` of [`Op::ToEdge`] under `declared`, if there is one.
    fn edge(&self, declared: RateLimit, index: usize) -> Option<u64> {
        match rule(declared) {
            Rule::Window { window, .. } => {
                let mut times: Vec<u64> = self.log.iter().map(|(at, _)| at + window).collect();
                times.sort_unstable();
                times.get(index).copied()
            }
            Rule::Cell { interval, span } => {
                (self.tat > 0).then(|| (self.tat + interval).saturating_sub(span))
            }
        }
    }
}

/// Ops whose steps are waits of real time (for a clock that runs on).
fn real_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1..=4u64).prop_map(Op::Take),
        3 => (0..=12i64).prop_map(|k| k * 10_000).prop_map(Op::Step),
        1 => limit().prop_map(Op::Declare),
        1 => Just(Op::Reconfigure),
        2 => Just(Op::Look),
    ]
}

/// A name no other case uses.
fn fresh(what: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("{what}-{}", NEXT.fetch_add(1, Ordering::SeqCst))
}

/// The handle of `limiter` declaring `limit`.
fn declaring(limiter: &RateLimiter, limit: RateLimit) -> RateLimiter {
    limiter.with_limit(limit).expect("a valid limit")
}

/// The outcome of a take, as the API answered it.
fn observed(taken: redis_lease::Result<Option<redis_lease::Granted>>) -> (Outcome, Option<u64>) {
    match taken {
        Ok(Some(granted)) => (
            Outcome::Granted {
                available: granted.available(),
            },
            Some(at_micros(granted.granted_at())),
        ),
        Ok(None) => (Outcome::Refused, None),
        Err(Error::InvalidArgument(why)) if why.contains("declared") => {
            // The stored limit is named in the message; the model's is compared instead.
            (
                Outcome::Declared(RateLimit::window(0, Duration::ZERO)),
                None,
            )
        }
        Err(error) => panic!("a take failed: {error}"),
    }
}

/// Whether two outcomes are the same, a refusal's stored limit aside (compared by the model).
fn same_kind(a: Outcome, b: Outcome) -> bool {
    std::mem::discriminant(&a) == std::mem::discriminant(&b)
        && !matches!((a, b), (Outcome::Granted { available: x }, Outcome::Granted { available: y }) if x != y)
}

// ---- PostgreSQL, on a clock the test sets ----

#[cfg(feature = "postgres")]
mod on_postgres {
    use super::*;
    use proptest::test_runner::{Config, TestRunner};
    use testkit::PgServer;

    /// Every take, reconfiguration and read answers exactly as the model does at the clock the
    /// test set, stepped forward and back; the grants' times keep their limits. One server and
    /// one client for every case; each case's clock starts a day after the last one's.
    #[test]
    fn a_limiter_on_postgres_answers_as_the_model_does_at_every_clock() {
        let start = 1_900_000_000u64;
        let server = PgServer::start_on_clock(UNIX_EPOCH + Duration::from_secs(start));
        server
            .psql(&format!(
                "GRANT CREATE ON DATABASE postgres TO {}",
                PgServer::SCRAM_USER
            ))
            .expect("granted");
        let client = Client::postgres(server.scram_url())
            .build()
            .expect("valid settings");
        let cases = AtomicUsize::new(0);
        let mut runner = TestRunner::new(Config {
            cases: 512,
            ..Config::default()
        });
        let ops = (limit(), prop::collection::vec(exact_op(), 1..60));
        let ran = runner.run(&ops, |(first, ops)| {
            let day = u64::try_from(cases.fetch_add(1, Ordering::SeqCst)).expect("few cases");
            let mut clock = (start + 86_400 * (day + 1)) * 1_000_000;
            server.set_clock(UNIX_EPOCH + Duration::from_micros(clock));
            let limiter = client
                .rate_limiter(&fresh("model"), 1, Duration::from_secs(1))
                .expect("valid");
            let (mut model, mut declared, mut made, mut epoch) =
                (Model::default(), first, Vec::new(), 0);
            for op in ops {
                let handle = declaring(&limiter, declared);
                match op {
                    Op::Take(n) if n > declared.most_at_once() => {
                        prop_assert!(matches!(
                            handle.try_acquire(n),
                            Err(Error::InvalidArgument(_))
                        ));
                    }
                    Op::Take(n) => {
                        let (expected, at) = model.take(clock, declared, n);
                        let (got, got_at) = observed(handle.try_acquire(n));
                        prop_assert!(
                            same_kind(got, expected),
                            "{:?} where the model says {:?}",
                            got,
                            expected
                        );
                        if let Outcome::Granted { .. } = got {
                            prop_assert_eq!(got_at, Some(at));
                            made.push(Made {
                                at,
                                n,
                                limit: declared,
                                epoch,
                            });
                        }
                    }
                    Op::Step(by) => {
                        clock = clock.checked_add_signed(by).expect("a near time");
                        server.set_clock(UNIX_EPOCH + Duration::from_micros(clock));
                    }
                    Op::ToEdge(index, by) => {
                        if let Some(edge) = model.edge(declared, index) {
                            clock = edge.checked_add_signed(by).expect("a near time");
                            server.set_clock(UNIX_EPOCH + Duration::from_micros(clock));
                        }
                    }
                    Op::Declare(limit) => declared = limit,
                    Op::Reconfigure => {
                        let expected = model.reconfigure(clock, declared);
                        let got = handle.reconfigure();
                        match expected {
                            Ok(before) => {
                                prop_assert_eq!(got.expect("reachable"), before);
                                epoch += 1;
                            }
                            Err(_) => {
                                prop_assert!(matches!(got, Err(Error::InvalidArgument(_))));
                            }
                        }
                    }
                    Op::Look => {
                        let state = handle.inspect().expect("reachable");
                        let (stored, used, available, next) = model.look(clock, declared);
                        prop_assert_eq!(at_micros(state.now), model.now(clock));
                        prop_assert_eq!(
                            (
                                state.limit,
                                state.used,
                                state.available,
                                state.next_in.map(micros)
                            ),
                            (stored, used, available, next)
                        );
                    }
                }
                prop_assert!(check_made(&made).is_ok(), "{:?}", check_made(&made));
            }
            Ok(())
        });
        match ran {
            Ok(()) => {}
            Err(proptest::test_runner::TestError::Fail(why, (first, ops))) => {
                panic!("{why}; minimal failing input: first = {first:?}, ops = {ops:#?}")
            }
            Err(failure) => panic!("{failure}"),
        }
    }
}

// ---- Redis, on the host's clock ----

/// One server for the cases; each uses a name of its own.
fn redis() -> Arc<RedisServer> {
    static SHARED: Mutex<Weak<RedisServer>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(server) = shared.upgrade() {
        return server;
    }
    let server = Arc::new(RedisServer::start());
    *shared = Arc::downgrade(&server);
    server
}

/// How far around a call's interval a boundary makes its outcome one of two: the host's clock
/// read before and after the call, which the store reads between them.
const MARGIN: u64 = 1_000;

fn now_micros() -> u64 {
    at_micros(SystemTime::now())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Every take and reconfiguration answers as the model does at the times around its call
    /// (either of the two answers where a boundary falls between them), every read as it does
    /// at the store's time of the read; the grants' times keep their limits.
    #[test]
    fn a_limiter_on_redis_answers_as_the_model_does_around_each_call(
        first in limit(),
        ops in prop::collection::vec(real_op(), 1..30),
    ) {
        let server = redis();
        let client = common::client(&server);
        let limiter = client.rate_limiter(&fresh("model"), 1, Duration::from_secs(1))
            .expect("valid");
        let (mut model, mut declared, mut made, mut epoch) =
            (Model::default(), first, Vec::new(), 0);
        for op in ops {
            let handle = declaring(&limiter, declared);
            match op {
                Op::Take(n) if n > declared.most_at_once() => {
                    prop_assert!(matches!(handle.try_acquire(n), Err(Error::InvalidArgument(_))));
                }
                Op::Take(n) => {
                    let before = now_micros() - MARGIN;
                    let (got, got_at) = observed(handle.try_acquire(n));
                    let after = now_micros() + MARGIN;
                    let (early, _) = model.clone().take(before, declared, n);
                    let (late, _) = model.clone().take(after, declared, n);
                    prop_assert!(
                        same_kind(got, early) || same_kind(got, late),
                        "{:?} where the model says {:?} before and {:?} after", got, early, late
                    );
                    if same_kind(early, late) {
                        prop_assert!(same_kind(got, early), "{:?} where the model says {:?}", got, early);
                    }
                    // A refusal wrote nothing that counts later.
                    if let Some(at) = got_at {
                        prop_assert!((before..=after).contains(&at));
                        let mut exact = model.clone();
                        let (mut granted, mut when) = exact.take(at, declared, n);
                        if !same_kind(got, granted) && !same_kind(early, late) {
                            // The model knows when a reconfiguration's limit lapses only to
                            // within that call's interval: the grant says it had lapsed.
                            exact = model.clone();
                            exact.lapses = exact.lapses.min(at);
                            (granted, when) = exact.take(at, declared, n);
                        }
                        model = exact;
                        prop_assert!(same_kind(got, granted), "{:?} at {}: {:?}", got, at, granted);
                        prop_assert_eq!(when, at);
                        made.push(Made { at, n, limit: declared, epoch });
                    }
                }
                Op::Step(by) => std::thread::sleep(Duration::from_micros(by.unsigned_abs())),
                Op::ToEdge(..) => unreachable!("not generated for a clock that runs on"),
                Op::Declare(limit) => declared = limit,
                Op::Reconfigure => {
                    let before = now_micros() - MARGIN;
                    let got = handle.reconfigure();
                    let after = now_micros() + MARGIN;
                    let early = model.clone().reconfigure(before, declared);
                    let late = model.clone().reconfigure(after, declared);
                    match &got {
                        Ok(stored) => {
                            prop_assert!(early == Ok(*stored) || late == Ok(*stored),
                                "{:?} where the model says {:?} or {:?}", got, early, late);
                            // The limit lapses a window after the store's clock read, at most
                            // `after`: the later bound keeps it stored the longer.
                            model.reconfigure(after, declared).expect("as observed");
                            // The host's clock runs on: the store's never reads before its own
                            // last write, and the model's floor is what the store read, at most.
                            model.last = model.last.min(before);
                            epoch += 1;
                        }
                        Err(Error::InvalidArgument(_)) => {
                            prop_assert!(early.is_err() || late.is_err(), "refused where the model stores");
                        }
                        Err(error) => panic!("a reconfiguration failed: {error}"),
                    }
                }
                Op::Look => {
                    let state = handle.inspect().expect("reachable");
                    let now = at_micros(state.now);
                    let early = model.look(now - MARGIN, declared);
                    let late = model.look(now + MARGIN, declared);
                    if (early.0, early.1, early.2) == (late.0, late.1, late.2) {
                        let exact = model.look(now, declared);
                        prop_assert_eq!(
                            (state.limit, state.used, state.available, state.next_in.map(micros)),
                            exact
                        );
                    }
                }
            }
            prop_assert!(check_made(&made).is_ok(), "{:?}", check_made(&made));
        }
    }
}

#[test]
fn the_guarantee_check_finds_an_excess() {
    let limit = RateLimit::window(2, Duration::from_secs(1));
    let grant = |at| Made {
        at,
        n: 1,
        limit,
        epoch: 0,
    };
    assert!(check_made(&[grant(0), grant(500_000), grant(1_000_000)]).is_ok());
    assert!(check_made(&[grant(0), grant(500_000), grant(999_999)]).is_err());
    let cells = RateLimit::cell_rate(1, Duration::from_secs(1), 2);
    let cell = |at| Made {
        at,
        n: 1,
        limit: cells,
        epoch: 0,
    };
    assert!(check_made(&[cell(0), cell(0), cell(1_000_000)]).is_ok());
    assert!(check_made(&[cell(0), cell(0), cell(999_999)]).is_err());
}
