//! What the rate limiter's tests share: the calls every store that offers limiters must answer
//! alike ([`a_limiter_works`]), and the checks of logged grants: exact, on the store's own
//! times ([`check_store_times`]), and sound, on the times before and after each call
//! ([`check_intervals`]).

use redis_lease::{Cancel, Client, Error, RateLimit};
use std::collections::BinaryHeap;
use std::time::{Duration, SystemTime};

/// One grant, as a caller logged it: the monotonic clock (ns, shared by the processes of one
/// host) before its call and after, and the store's time of the grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Logged {
    pub before: u64,
    pub after: u64,
    pub at: SystemTime,
}

/// The host's monotonic clock, in nanoseconds: one clock for every process of the host, which
/// libfaketime leaves alone (read through the vDSO).
pub fn monotonic_ns() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(now.tv_sec).expect("after boot") * 1_000_000_000
        + u64::try_from(now.tv_nsec).expect("below a second")
}

/// A grant as a line of a log file, and back.
pub fn to_line(grant: &Logged) -> String {
    let at = grant
        .at
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after the epoch")
        .as_micros();
    format!("{} {} {at}\n", grant.before, grant.after)
}

pub fn from_line(line: &str) -> Logged {
    let mut parts = line
        .split(' ')
        .map(|part| part.parse::<u64>().expect("a number"));
    let mut next = || parts.next().expect("three numbers");
    Logged {
        before: next(),
        after: next(),
        at: SystemTime::UNIX_EPOCH + Duration::from_micros(next()),
    }
}

/// Whether some `limit + 1` of the grants, each of one unit, certainly fell within a window
/// shorter than `window`: their calls all began and ended within it. The real time of a grant
/// lies between the times before and after its call, so a set whose latest end is less than
/// `window` after its earliest start is a certain excess; a check that finds none has found no
/// excess that the logs prove. For each grant as the earliest start, the `limit + 1` earliest
/// ends among the grants started no sooner are the tightest set.
pub fn check_intervals(grants: &[Logged], limit: u64, window: Duration) -> Result<(), String> {
    let limit = usize::try_from(limit).expect("a small limit");
    let window = u64::try_from(window.as_nanos()).expect("a short window");
    let mut by_start: Vec<&Logged> = grants.iter().collect();
    by_start.sort_by_key(|grant| grant.before);
    // The earliest ends among the grants started no sooner than the current one: a max-heap
    // of at most limit + 1 of them.
    let mut earliest_ends = BinaryHeap::with_capacity(limit + 2);
    for grant in by_start.iter().rev() {
        earliest_ends.push(grant.after);
        if earliest_ends.len() > limit + 1 {
            earliest_ends.pop();
        }
        if earliest_ends.len() == limit + 1 {
            let latest = *earliest_ends.peek().expect("full");
            if latest.saturating_sub(grant.before) < window {
                return Err(format!(
                    "{} grants within {} ns, from the call that began at {} ns, where at most \
                     {limit} fit in {window} ns",
                    limit + 1,
                    latest - grant.before,
                    grant.before
                ));
            }
        }
    }
    Ok(())
}

/// Whether the store's own times of the grants (one unit each) keep `limit` in any window of
/// `window`: the grant `limit` places after any other is at least `window` after it.
pub fn check_store_times(grants: &[Logged], limit: u64, window: Duration) -> Result<(), String> {
    let limit = usize::try_from(limit).expect("a small limit");
    let mut times: Vec<SystemTime> = grants.iter().map(|grant| grant.at).collect();
    times.sort();
    for (first, last) in times.iter().zip(times.iter().skip(limit)) {
        let span = last.duration_since(*first).expect("sorted");
        if span < window {
            return Err(format!(
                "{} grants within {span:?} of the store's clock, from {first:?}",
                limit + 1
            ));
        }
    }
    Ok(())
}

/// The calls of a limiter on `client`'s store, named from `name`: grants up to the limit and
/// no more, the stored limit refusing another declaration until reconfigured, a wait for the
/// computed moment, a cell rate's burst, cancellation. Times are the store's, from the grants.
pub fn a_limiter_works(client: &Client, name: &str) {
    let window = Duration::from_millis(400);
    let limiter = client
        .rate_limiter(&format!("{name}:window"), 3, window)
        .expect("valid");
    let first = limiter.try_acquire(2).expect("reachable").expect("free");
    assert_eq!((first.count(), first.available()), (2, 1));
    let second = limiter
        .try_acquire(1)
        .expect("reachable")
        .expect("one left");
    assert_eq!(second.available(), 0);
    assert!(second.granted_at() >= first.granted_at());
    assert!(limiter.try_acquire(1).expect("reachable").is_none());
    let state = limiter.inspect().expect("reachable");
    assert_eq!(state.limit, Some(limiter.limit()));
    assert_eq!((state.used, state.available), (3, 0));
    assert!(state
        .next_in
        .is_some_and(|next| next > Duration::ZERO && next <= window));
    // The next grant comes a window after the first two, by the store's clock.
    let third = limiter.acquire(2).expect("granted once two left");
    let waited = third
        .granted_at()
        .duration_since(first.granted_at())
        .expect("later");
    assert!(waited >= window, "granted {waited:?} after the first");
    assert!(waited < window * 4, "granted {waited:?} after the first");

    // Another declaration is refused while grants count, nothing taken; reconfigured, it holds.
    let wider = limiter
        .with_limit(RateLimit::window(5, window))
        .expect("valid");
    let refused = wider.try_acquire(1);
    assert!(
        matches!(&refused, Err(Error::InvalidArgument(why)) if why.contains("stores 3 per")),
        "{refused:?}"
    );
    assert_eq!(
        wider.reconfigure().expect("reachable"),
        Some(limiter.limit())
    );
    let state = wider.inspect().expect("reachable");
    assert_eq!(state.limit, Some(wider.limit()));
    assert!(
        state.used >= 2 && state.available == 5 - state.used,
        "{state:?}"
    );
    assert!(matches!(
        limiter.try_acquire(1),
        Err(Error::InvalidArgument(_))
    ));
    let cell = wider
        .with_limit(RateLimit::cell_rate(10, window, 2))
        .expect("valid");
    assert!(
        matches!(cell.reconfigure(), Err(Error::InvalidArgument(why)) if why.contains("other mode")),
        "a mode change while grants count"
    );
    assert!(matches!(
        limiter.try_acquire(4),
        Err(Error::InvalidArgument(_))
    ));

    // A cell rate: its burst at once, then one grant per interval.
    let interval = Duration::from_millis(100);
    let cells = client
        .cell_rate_limiter(&format!("{name}:cells"), 4, interval * 4, 3)
        .expect("valid");
    let burst = cells.try_acquire(3).expect("reachable").expect("a burst");
    assert_eq!(burst.available(), 0);
    assert!(cells.try_acquire(1).expect("reachable").is_none());
    let next = cells.acquire(1).expect("granted");
    let gap = next
        .granted_at()
        .duration_since(burst.granted_at())
        .expect("later");
    assert!(gap >= interval && gap < interval * 4, "{gap:?}");
    let state = cells.inspect().expect("reachable");
    assert!(state.used >= 2 && state.available <= 1, "{state:?}");

    // A deadline the moment falls after returns at once; a cancelled wait says so.
    let slow = client
        .rate_limiter(&format!("{name}:slow"), 1, Duration::from_secs(30))
        .expect("valid");
    slow.try_acquire(1).expect("reachable").expect("free");
    let started = std::time::Instant::now();
    assert!(slow
        .try_acquire_for(1, Duration::from_secs(5))
        .expect("reachable")
        .is_none());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let cancel = Cancel::new();
    let stopper = cancel.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        stopper.cancel();
    });
    let cancelled = slow.cancel_on(&cancel).acquire(1);
    canceller.join().expect("the canceller ends");
    assert!(
        matches!(cancelled, Err(Error::Cancelled { .. })),
        "{cancelled:?}"
    );
}
