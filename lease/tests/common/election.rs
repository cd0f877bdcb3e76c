//! The election scenario every deployment runs: campaigns that exclude each other with rising
//! terms, proclamations, resignations (and their retries), and an observer whose history follows
//! them in order.

use redis_lease::{Client, Error, Guard, Leader, Observer};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// A leader as the tests compare it: its term and value.
pub type Seen = Option<(u64, String)>;

/// `leader` as the tests compare it.
pub fn seen(leader: Option<Leader>) -> Seen {
    leader.map(|leader| (leader.term, leader.value))
}

/// The next change `observer` reports, within 10 s.
pub fn next_change(observer: &Observer) -> Seen {
    seen(
        observer
            .changes()
            .recv_timeout(Duration::from_secs(10))
            .expect("the observer reports the change"),
    )
}

/// Waits until `observer` reports `wanted`, skipping the changes before it (a term may show
/// first without its value, as none); returns those skipped.
pub fn until_reported(observer: &Observer, wanted: &Seen) -> Vec<Seen> {
    let mut skipped = Vec::new();
    loop {
        let change = next_change(observer);
        if &change == wanted {
            return skipped;
        }
        skipped.push(change);
    }
}

fn leader(term: u64, value: &str) -> Seen {
    Some((term, value.to_owned()))
}

/// Two clients of one deployment, whose default lease is short (hundreds of milliseconds), take
/// turns to lead the election `name`, observed by a third view.
pub fn an_election_works(first: &Client, second: &Client, name: &str) {
    first.ping().expect("the deployment serves");
    let election = first.election(name).expect("valid");
    assert_eq!(election.name(), name);
    assert_eq!(seen(election.leader().expect("reachable")), None);
    let observer = election.observe().expect("reachable");
    assert_eq!(next_change(&observer), None, "no leader at first");

    let mut a = election.campaign("a").expect("free");
    let term_a = a.term();
    assert_eq!(a.value(), "a");
    assert!(!a.is_lost());
    assert_eq!(until_reported(&observer, &leader(term_a, "a")), vec![]);
    assert_eq!(
        seen(election.leader().expect("reachable")),
        leader(term_a, "a")
    );
    let state = election.inspect().expect("reachable");
    assert_eq!(state.hold_token, Some(term_a));
    assert_eq!(state.proclaimed.as_deref(), Some("a"));

    // The lock of the same name is another primitive.
    let lock = first.lock(name).expect("valid");
    lock.try_lock()
        .expect("reachable")
        .expect("free")
        .unlock()
        .expect("held");

    // A proclamation changes the value, not the term.
    a.proclaim("a2").expect("leading");
    assert_eq!((a.term(), a.value()), (term_a, "a2"));
    assert_eq!(next_change(&observer), leader(term_a, "a2"));

    // Another campaign waits while the first leads, and leads once it resigns.
    let other = second.election(name).expect("valid");
    assert!(other.try_campaign("b").expect("reachable").is_none());
    let (sent, got) = mpsc::channel();
    let waiting = other.clone();
    thread::spawn(move || {
        let _ = sent.send(waiting.campaign("b"));
    });
    assert!(
        got.recv_timeout(Duration::from_millis(300)).is_err(),
        "led twice"
    );
    a.resign().expect("resigned");
    assert!(a.is_lost() && a.is_resigned());
    a.resign().expect("resigning again changes nothing");
    assert!(matches!(a.proclaim("late"), Err(Error::NotOwner { .. })));
    let b = got
        .recv_timeout(Duration::from_secs(10))
        .expect("the waiting campaign ends")
        .expect("leads");
    assert!(b.term() > term_a, "{} after {term_a}", b.term());
    let skipped = until_reported(&observer, &leader(b.term(), "b"));
    assert!(skipped.iter().all(Option::is_none), "{skipped:?}");

    // Ended as any hold is (the `Guard` trait), a leadership resigns at once.
    let term_b = b.term();
    end_hold(b).expect("resigned");
    assert_eq!(next_change(&observer), None);
    let c = election.campaign("c").expect("free");
    assert!(c.term() > term_b);
    until_reported(&observer, &leader(c.term(), "c"));
    assert!(matches!(
        election.campaign("x".repeat(redis_lease::election::MAX_VALUE + 1)),
        Err(Error::InvalidArgument(_))
    ));
    // Dropped, a leadership resigns.
    drop(c);
    assert_eq!(next_change(&observer), None);
    assert!(observer.leader().is_none());
}

/// Ends `hold`, whichever primitive made it.
fn end_hold(hold: impl Guard) -> redis_lease::Result<()> {
    assert!(!hold.is_lost() && hold.lost().is_none());
    hold.unlock()
}
