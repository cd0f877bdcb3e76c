//! Leader election on one Redis server, through the timelines of the field's election bugs: a
//! resignation whose reply is lost or that never arrives (etcd #22123), a campaign cut off
//! mid-request (etcd #21128), a leader cut off within and past its lease and reconnecting
//! (Curator CURATOR-504/644), a leader killed, and one frozen past its lease (SIGSTOP), whose late
//! fenced write is refused. The scenario every deployment runs is in `common/election.rs`.

mod common;

use common::election::{next_change, seen, until_reported};
use common::RedisServer;
use redis::Commands;
use redis_lease::{Client, Error, Leadership};
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime};
use testkit::{Gate, Lossy};

/// Every leader's lease here.
const LEASE: Duration = Duration::from_millis(600);

/// A client of `url` with a short lease and command timeout.
fn client(url: &str) -> Client {
    Client::builder(url)
        .default_lease(LEASE)
        .connect_timeout(Duration::from_millis(300))
        .command_timeout(Duration::from_millis(300))
        .build()
        .expect("valid settings")
}

/// Writes `who`'s entry to the fenced log if `term` is at least the highest term seen there:
/// whether the write was accepted.
fn fenced(con: &mut redis::Connection, term: u64, who: &str) -> bool {
    let accepted: i64 = redis::Script::new(
        "local top = tonumber(redis.call('get', KEYS[1]) or '0')
         if tonumber(ARGV[1]) < top then
           redis.call('rpush', KEYS[2], ARGV[2] .. ' refused ' .. ARGV[1])
           return 0
         end
         redis.call('set', KEYS[1], ARGV[1])
         redis.call('rpush', KEYS[2], ARGV[2] .. ' ok ' .. ARGV[1])
         return 1",
    )
    .key("fence:top")
    .key("fence:log")
    .arg(term)
    .arg(who)
    .invoke(con)
    .expect("the fence runs");
    accepted == 1
}

/// A leader in a child process, and its stdout.
struct ChildLeader {
    child: Child,
    lines: std::io::Lines<BufReader<ChildStdout>>,
    term: u64,
}

impl ChildLeader {
    /// Starts the child, which campaigns on `server` and says when it leads.
    fn start(server: &RedisServer) -> ChildLeader {
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "child_leader_entry",
                "--test-threads=1",
                "--nocapture",
            ])
            .env("LEASE_ELECTION_CHILD_URL", server.url())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the child");
        let stdout = child.stdout.take().expect("piped");
        let mut lines = BufReader::new(stdout).lines();
        let term = loop {
            let line = lines
                .next()
                .expect("the child says it leads")
                .expect("read");
            // The harness's own words may come first on the line.
            if let Some((_, term)) = line.split_once("leading ") {
                break term.parse().expect("a term");
            }
        };
        ChildLeader { child, lines, term }
    }

    /// Sends `signal` to the child.
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {signal}");
    }

    /// What the child says next after `prefix`, to the end of its line.
    fn said(&mut self, prefix: &str) -> String {
        loop {
            let line = self
                .lines
                .next()
                .unwrap_or_else(|| panic!("the child says {prefix:?}"))
                .expect("read");
            if let Some((_, rest)) = line.split_once(prefix) {
                return rest.to_owned();
            }
        }
    }
}

impl Drop for ChildLeader {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Microseconds since the Unix epoch of `instant`, a moment of this process.
fn unix_micros(instant: Instant) -> u128 {
    let now = (SystemTime::now(), Instant::now());
    let at = if instant <= now.1 {
        now.0 - (now.1 - instant)
    } else {
        now.0 + (instant - now.1)
    };
    at.duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_micros()
}

/// The child half of the killed and frozen leaders: leads, writes through the fence while it
/// believes it leads, and says when it finds its leadership lost (with the local deadline it
/// had, in microseconds since the Unix epoch).
#[test]
#[allow(clippy::print_stdout)] // its stdout is what the parent reads
fn child_leader_entry() {
    let Ok(url) = std::env::var("LEASE_ELECTION_CHILD_URL") else {
        return;
    };
    let client = client(&url);
    let mut con = redis::Client::open(url.as_str())
        .expect("valid url")
        .get_connection()
        .expect("reachable");
    let leadership = client
        .election("frozen")
        .expect("valid")
        .campaign("child")
        .expect("leads");
    println!("leading {}", leadership.term());
    while !leadership.is_lost() {
        fenced(&mut con, leadership.term(), "child");
        thread::sleep(Duration::from_millis(5));
    }
    println!("lost {}", unix_micros(leadership.valid_until()));
    loop {
        thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn a_frozen_leader_is_past_its_deadline_before_the_next_term_and_its_late_write_is_refused() {
    let server = RedisServer::start();
    let mut con = server.connection();
    let mut frozen = ChildLeader::start(&server);
    common::wait_until("the child writes as leader", || {
        con.llen::<_, usize>("fence:log").expect("LLEN") > 5
    });
    frozen.signal("-STOP");
    let rival = client(&server.url());
    let leadership = rival
        .election("frozen")
        .expect("valid")
        .try_campaign_for(Duration::from_secs(10), "rival")
        .expect("reachable")
        .expect("the frozen term lapses");
    let led_at = unix_micros(Instant::now());
    assert!(leadership.term() > frozen.term);
    assert!(
        fenced(&mut con, leadership.term(), "rival"),
        "the first write"
    );
    frozen.signal("-CONT");
    let deadline: u128 = frozen.said("lost ").parse().expect("a deadline");
    assert!(
        deadline < led_at,
        "the frozen leader's deadline {deadline} is not before the next term ({led_at})"
    );
    assert!(
        fenced(&mut con, leadership.term(), "rival"),
        "no one wrote over it"
    );
    let log: Vec<String> = con.lrange("fence:log", 0, -1).expect("LRANGE");
    let first_rival = log
        .iter()
        .position(|line| line.starts_with("rival"))
        .expect("written");
    let late: Vec<&String> = log[first_rival..]
        .iter()
        .filter(|line| line.starts_with("child ok"))
        .collect();
    assert!(late.is_empty(), "late writes accepted: {late:?}");
}

#[test]
fn a_killed_leader_is_followed_by_a_higher_term_and_observers_never_go_back() {
    let server = RedisServer::start();
    let killed = ChildLeader::start(&server);
    let observing = client(&server.url());
    let election = observing.election("frozen").expect("valid");
    let observer = election.observe().expect("reachable");
    let first = next_change(&observer);
    assert_eq!(first.as_ref().map(|(term, _)| *term), Some(killed.term));
    killed.signal("-KILL");
    let started = Instant::now();
    let leadership = election
        .try_campaign_for(Duration::from_secs(10), "next")
        .expect("reachable")
        .expect("the killed term lapses");
    assert!(
        started.elapsed() < LEASE * 5,
        "took {:?}",
        started.elapsed()
    );
    assert!(leadership.term() > killed.term);
    let mut history = vec![first];
    history.extend(until_reported(
        &observer,
        &Some((leadership.term(), "next".into())),
    ));
    assert!(history[1..].iter().all(Option::is_none), "{history:?}");
}

#[test]
fn a_resignation_whose_reply_is_lost_is_finished_by_a_later_call() {
    let server = RedisServer::start();
    let proxy = Lossy::start(server.port());
    let leading = client(&proxy.url());
    let watching = client(&server.url());
    let election = leading.election("lossy").expect("valid");
    // The server knows the scripts: a reply that is lost is not a NOSCRIPT one.
    election
        .campaign("warm")
        .expect("free")
        .resign()
        .expect("led");
    let mut leadership = election.campaign("a").expect("free");
    let election = watching.election("lossy").expect("valid");
    proxy.lose_replies(true);
    let failed = leadership.resign();
    assert!(
        matches!(failed, Err(Error::Unavailable { .. })),
        "{failed:?}"
    );
    assert!(leadership.is_lost() && !leadership.is_resigned());
    // It was applied: the term is over, long before its lease would lapse.
    assert_eq!(seen(election.leader().expect("reachable")), None);
    let next = election
        .try_campaign("b")
        .expect("reachable")
        .expect("free");
    assert!(next.term() > leadership.term());
    proxy.lose_replies(false);
    leadership.resign().expect("found applied");
    assert!(leadership.is_resigned());
    assert_eq!(
        seen(election.leader().expect("reachable")),
        Some((next.term(), "b".into())),
        "the later call touched nothing of the next term"
    );
}

#[test]
fn a_resignation_that_never_arrived_ends_the_term_by_its_lease_and_a_later_call_says_so() {
    let server = RedisServer::start();
    let gate = Gate::start(server.port());
    let leading = client(&gate.url());
    let mut leadership = leading
        .election("cut")
        .expect("valid")
        .campaign("a")
        .expect("free");
    let watching = client(&server.url());
    let election = watching.election("cut").expect("valid");
    gate.close();
    let failed = leadership.resign();
    assert!(
        matches!(failed, Err(Error::Unavailable { .. })),
        "{failed:?}"
    );
    assert!(leadership.is_lost() && !leadership.is_resigned());
    // Not applied, and renewed no more: the term stands until its lease lapses.
    let failed_at = Instant::now();
    assert_eq!(
        seen(election.leader().expect("reachable")).map(|(term, _)| term),
        Some(leadership.term())
    );
    let next = election
        .try_campaign_for(Duration::from_secs(10), "b")
        .expect("reachable")
        .expect("the term lapses");
    assert!(failed_at.elapsed() < LEASE * 3, "{:?}", failed_at.elapsed());
    gate.open();
    leadership.resign().expect("found over");
    assert_eq!(
        seen(election.leader().expect("reachable")),
        Some((next.term(), "b".into()))
    );
}

#[test]
fn a_campaign_cut_off_mid_request_leaves_no_term_behind() {
    let server = RedisServer::start();
    let proxy = Lossy::start(server.port());
    let cut = client(&proxy.url());
    let election = cut.election("mid").expect("valid");
    proxy.lose_replies(true);
    let failed = election.try_campaign("a");
    assert!(
        matches!(failed, Err(Error::Unavailable { .. })),
        "{failed:?}"
    );
    let other = client(&server.url());
    let started = Instant::now();
    let leadership = other
        .election("mid")
        .expect("valid")
        .try_campaign_for(Duration::from_secs(5), "b")
        .expect("reachable")
        .expect("nothing left behind");
    assert!(
        started.elapsed() < LEASE / 2,
        "waited {:?}: the cut-off campaign's term was left to lapse",
        started.elapsed()
    );
    drop(leadership);
}

/// A leader cut off from Redis past its lease, reconnecting after a rival leads.
fn cut_off_leader(cut_for: Duration) -> (Leadership, Option<Leadership>, Gate, RedisServer) {
    let server = RedisServer::start();
    let gate = Gate::start(server.port());
    let leading = client(&gate.url());
    let leadership = leading
        .election("cut")
        .expect("valid")
        .campaign("a")
        .expect("free");
    let rival = client(&server.url());
    gate.close();
    let rival_led = rival
        .election("cut")
        .expect("valid")
        .try_campaign_for(cut_for, "rival")
        .expect("reachable");
    gate.open();
    // Keep the client alive with its leadership.
    std::mem::forget(leading);
    (leadership, rival_led, gate, server)
}

#[test]
fn a_leader_cut_off_past_its_lease_is_told_before_a_rival_leads_and_never_leads_again() {
    let (mut leadership, rival, _gate, _server) = cut_off_leader(Duration::from_secs(10));
    let rival = rival.expect("the cut-off term lapses");
    assert!(leadership.is_lost(), "told by its deadline");
    assert!(rival.term() > leadership.term());
    // Reconnected, it does not lead again: its term is over in Redis.
    thread::sleep(LEASE);
    assert!(leadership.is_lost());
    let proclaimed = leadership.proclaim("back");
    assert!(
        matches!(proclaimed, Err(Error::NotOwner { .. })),
        "{proclaimed:?}"
    );
    assert!(!rival.is_lost());
}

#[test]
fn a_leader_cut_off_within_its_lease_keeps_leading_and_no_rival_leads() {
    let (leadership, rival, _gate, _server) = cut_off_leader(LEASE / 4);
    assert!(rival.is_none(), "a rival led while the term stood");
    thread::sleep(LEASE);
    assert!(!leadership.is_lost(), "renewed again once reconnected");
}
