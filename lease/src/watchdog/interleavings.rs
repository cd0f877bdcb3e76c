//! The watchdog under every interleaving `shuttle` tries (`RUSTFLAGS="--cfg shuttle" cargo test -p
//! redis-lease --lib interleavings`, as `scripts/test` runs it): the timer's worker firing
//! renewal triggers, the renewal thread sending them, and the holder releasing, each switching
//! at every lock, atomic and channel.

use super::*;
use crate::backend::{Renewal, Renewed, Renewer};
use crate::events::Events;
use hashwheel::checks::{await_exit, explore, timer, UNREACHED};
use hashwheel::ManualClock;
use shuttle::thread;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const LEASE: Duration = Duration::from_millis(30);

/// Executions in which a renewal call was out as the release began: the window the check is
/// about, which it must reach.
static OUT_AS_THE_RELEASE_BEGAN: AtomicUsize = AtomicUsize::new(0);

/// What the renewer saw.
#[derive(Default)]
struct Seen {
    /// Set by the holder once its release has returned.
    released: AtomicBool,
    /// Renewal calls under way.
    in_flight: AtomicUsize,
    /// Renewal calls begun after the release returned.
    late: AtomicUsize,
}

/// Renews everything, noting when; lets the other threads run in the middle of each call.
struct Recorder(Arc<Seen>);

impl Renewer for Recorder {
    fn renew(&mut self, leases: &[Renewal<'_>]) -> Vec<Renewed> {
        let seen = &self.0;
        if seen.released.load(Ordering::SeqCst) {
            seen.late.fetch_add(1, Ordering::SeqCst);
        }
        seen.in_flight.fetch_add(1, Ordering::SeqCst);
        thread::yield_now();
        seen.in_flight.fetch_sub(1, Ordering::SeqCst);
        vec![Renewed::Yes; leases.len()]
    }
}

/// A renewed hold is released while the clock moves through its renewals in steps of `step`
/// (steps of half a lease also pass its deadline while a renewal is out, losing the hold): the
/// release returns only once no renewal of it is out, lost or not, and no renewal is sent after
/// it returned (Redisson #7272: a watchdog that renewed after `unlock()`).
fn no_renewal_is_out_or_sent_after_the_release(step: Duration) {
    let clock = ManualClock::new();
    let timer = timer(&clock);
    let seen = Arc::new(Seen::default());
    let watchdog = Watchdog::start(
        timer.clone(),
        Box::new(Recorder(Arc::clone(&seen))),
        10,
        "renewals".into(),
        Events::new("check"),
    )
    .expect("started");
    let watched = watchdog
        .watch(Hold {
            name: "a".into(),
            address: "a".into(),
            owner: "owner".into(),
            hold: "hold".into(),
            lease: LEASE,
            renew: true,
            max_hold: None,
            sent_at: watchdog.now(),
        })
        .expect("watched");
    let mover = thread::spawn({
        let clock = clock.clone();
        move || {
            for _ in 0..4 {
                clock.advance(step);
            }
        }
    });
    thread::yield_now();
    let never = watchdog.now() + UNREACHED * 2;
    if seen.in_flight.load(Ordering::SeqCst) > 0 {
        OUT_AS_THE_RELEASE_BEGAN.fetch_add(1, Ordering::SeqCst);
    }
    watchdog.unwatch(watched.entry, Some(never));
    assert_eq!(
        seen.in_flight.load(Ordering::SeqCst),
        0,
        "the release returned while a renewal of its lease was out"
    );
    seen.released.store(true, Ordering::SeqCst);
    mover.join().expect("no panic");
    clock.advance(step);
    clock.advance(LEASE);
    assert_eq!(
        seen.late.load(Ordering::SeqCst),
        0,
        "a renewal was sent after the release returned"
    );
    drop(watchdog);
    timer.stop();
    await_exit(&timer);
}

#[test]
fn no_renewal_is_out_or_sent_after_the_release_under_any_interleaving() {
    for step in [LEASE / 3, LEASE / 2] {
        explore(
            move || no_renewal_is_out_or_sent_after_the_release(step),
            2_000,
        );
    }
    assert!(OUT_AS_THE_RELEASE_BEGAN.load(Ordering::SeqCst) > 0);
}
