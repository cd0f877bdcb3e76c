//! Prints the figures of `redis-lease`'s leader election on one Redis server and on one
//! standalone ZooKeeper, beside kazoo's `Election` (Python) on the same ZooKeeper, in one run:
//!
//! - `resign`: a leader resigns while another candidate waits: from just before the resignation
//!   to the moment the waiting candidate's campaign returns leading (p50, p99); and to the moment
//!   the slowest of 4 observers (each on a client of its own) has seen the new leader;
//! - `death`: a leader in a child process is killed (SIGKILL) while this process campaigns: from
//!   the kill to the moment this process leads (p50, p99). The lease (Redis) or session timeout
//!   (ZooKeeper, kazoo) is 500 ms for every side: that is what a death costs. The kill comes
//!   50 to 149 ms after the child leads, a different moment each round, the same on each side
//!   (ZooKeeper expires a session at the first of its 100 ms ticks after the timeout).
//!
//! `redis-lease`'s observers are `Election::observe`; kazoo has no observer, so its observers
//! are `ChildrenWatch`es on the election's node, the lowest contender being the leader. kazoo's
//! side is `benches/python/kazoo_election.py`, run by `python3` right after `redis-lease`'s
//! ZooKeeper side; without kazoo its rows say "not run: pip install kazoo".
//!
//! Run: `cargo run --release -p benches --bin election_figures [quick] [resign] [death]
//! [redis] [zookeeper] [kazoo]`: 200 resignations and 20 deaths per side, or with `quick` 10 and
//! 2 (the smoke run of `scripts/test`).
#![allow(clippy::print_stdout)]

use benches::child::{self, ChildProcess};
use benches::figures::{loadavg, quantile, Request};
use parking_lot::Mutex;
use redis_lease::{Client, Election};
use std::collections::HashMap;
use std::io::BufRead;
use std::process::Command;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use testkit::{RedisServer, ZooKeeper};

/// Every side's lease, or session timeout.
const LEASE: Duration = Duration::from_millis(500);
const OBSERVERS: usize = 4;
const NAME: &str = "bench-leader";
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/python/kazoo_election.py");

/// Where a side's election lives.
#[derive(Clone)]
enum Store {
    Redis(String),
    ZooKeeper(String),
}

impl Store {
    fn client(&self) -> Client {
        match self {
            Store::Redis(url) => Client::builder(url.as_str()),
            Store::ZooKeeper(hosts) => Client::zookeeper([hosts.as_str()]),
        }
        .default_lease(LEASE)
        .build()
        .expect("valid settings")
    }

    fn word(&self) -> (&'static str, &str) {
        match self {
            Store::Redis(url) => ("redis", url),
            Store::ZooKeeper(hosts) => ("zookeeper", hosts),
        }
    }
}

/// Latencies in ms, sorted.
struct Samples(Vec<f64>);

impl Samples {
    fn new(mut samples: Vec<f64>) -> Samples {
        samples.sort_by(f64::total_cmp);
        Samples(samples)
    }

    fn shown(&self) -> String {
        if self.0.is_empty() {
            return "-".into();
        }
        format!(
            "{:.1} / {:.1} ms",
            quantile(&self.0, 0.5),
            quantile(&self.0, 0.99)
        )
    }

    fn p50(&self) -> Option<f64> {
        (!self.0.is_empty()).then(|| quantile(&self.0, 0.5))
    }
}

/// One side's figures.
#[derive(Default)]
struct Figures {
    resign: Option<Samples>,
    observed: Option<Samples>,
    death: Option<Samples>,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("child-leader") {
        child_leader(&args[1], &args[2]);
        return;
    }
    let request = Request::from_args(&args);
    let named = |word: &str| args.iter().any(|arg| arg == word);
    let sides_named = ["redis", "zookeeper", "kazoo"]
        .iter()
        .any(|side| named(side));
    let side = |word: &str| !sides_named || named(word);
    let figure = |word: &str| !(named("resign") || named("death")) || named(word);
    let (rounds, deaths) = if request.quick { (10, 2) } else { (200, 20) };
    println!(
        "# Leader election figures ({})",
        if request.quick { "quick" } else { "full" }
    );
    println!();
    println!("load at start (/proc/loadavg): {}", loadavg());
    let redis = RedisServer::start();
    let zk = ZooKeeper::start();
    let mut rows: Vec<(&str, Result<Figures, String>)> = Vec::new();
    for (label, store) in [
        ("redis-lease, one Redis server", Store::Redis(redis.url())),
        (
            "redis-lease, ZooKeeper",
            Store::ZooKeeper(zk.connect_string()),
        ),
    ] {
        if !side(store.word().0) {
            continue;
        }
        let mut figures = Figures::default();
        if figure("resign") {
            let (resign, observed) = resignations(&store, rounds);
            figures.resign = Some(resign);
            figures.observed = Some(observed);
        }
        if figure("death") {
            figures.death = Some(deaths_of(&store, deaths));
        }
        rows.push((label, Ok(figures)));
    }
    if side("kazoo") {
        rows.push((
            "kazoo `Election`, ZooKeeper",
            kazoo(&zk.connect_string(), rounds, deaths, &figure),
        ));
    }
    println!();
    println!(
        "| election | resign to next leader, p50 / p99 | resign to every one of {OBSERVERS} observers seeing it, p50 / p99 | leader killed to next leader, p50 / p99 |"
    );
    println!("|---|---|---|---|");
    for (label, figures) in &rows {
        match figures {
            Ok(f) => println!(
                "| {label} | {} | {} | {} |",
                f.resign.as_ref().map_or("-".into(), Samples::shown),
                f.observed.as_ref().map_or("-".into(), Samples::shown),
                f.death.as_ref().map_or("-".into(), Samples::shown),
            ),
            Err(reason) => println!("| {label} | {reason} | | |"),
        }
    }
    let p50 = |label: &str, pick: fn(&Figures) -> Option<f64>| {
        rows.iter()
            .find(|(row, _)| row.starts_with(label))
            .and_then(|(_, figures)| figures.as_ref().ok())
            .and_then(pick)
    };
    let resign = |f: &Figures| f.resign.as_ref().and_then(Samples::p50);
    let observed = |f: &Figures| f.observed.as_ref().and_then(Samples::p50);
    for (what, pick) in [
        (
            "resign to next leader",
            resign as fn(&Figures) -> Option<f64>,
        ),
        ("resign to observers", observed),
    ] {
        if let (Some(lease), Some(kazoo)) =
            (p50("redis-lease, ZooKeeper", pick), p50("kazoo", pick))
        {
            println!();
            println!(
                "ZooKeeper, {what}, p50: lease / kazoo {:.2}x",
                lease / kazoo
            );
        }
    }
    println!();
    println!("load at end (/proc/loadavg): {}", loadavg());
}

/// `rounds` resignations with a candidate waiting: to the next leader, and to every observer
/// seeing it.
fn resignations(store: &Store, rounds: usize) -> (Samples, Samples) {
    let clients: Vec<Client> = (0..2).map(|_| store.client()).collect();
    let elections: Vec<Election> = clients
        .iter()
        .map(|client| client.election(NAME).expect("valid"))
        .collect();
    // When each observer first saw each term.
    let seen: Arc<Mutex<HashMap<u64, Vec<Instant>>>> = Arc::default();
    let observer_clients: Vec<Client> = (0..OBSERVERS).map(|_| store.client()).collect();
    let observers: Vec<_> = observer_clients
        .iter()
        .map(|client| {
            client
                .election(NAME)
                .expect("valid")
                .observe()
                .expect("reachable")
        })
        .collect();
    for observer in &observers {
        let (changes, seen) = (observer.changes().clone(), Arc::clone(&seen));
        thread::spawn(move || {
            for change in changes.iter().flatten() {
                seen.lock()
                    .entry(change.term)
                    .or_default()
                    .push(Instant::now());
            }
        });
    }
    let mut leadership = elections[0].campaign("0").expect("free");
    let (mut to_leader, mut to_observers) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let next = (round + 1) % 2;
        let waiting = elections[next].clone();
        let (led, told) = mpsc::channel();
        let candidate = thread::spawn(move || {
            let leadership = waiting.campaign(next.to_string()).expect("leads");
            let _ = led.send(Instant::now());
            leadership
        });
        // The candidate is waiting (its campaign found the leader), give or take.
        thread::sleep(Duration::from_millis(20));
        let resigned_at = Instant::now();
        leadership.resign().expect("resigned");
        let led_at = told.recv().expect("the candidate leads");
        leadership = candidate.join().expect("no panic");
        to_leader.push(ms(led_at - resigned_at));
        let term = leadership.term();
        let deadline = Instant::now() + Duration::from_secs(10);
        let all_saw = loop {
            if let Some(times) = seen
                .lock()
                .get(&term)
                .filter(|times| times.len() == OBSERVERS)
            {
                break times.iter().max().copied();
            }
            if Instant::now() > deadline {
                break None;
            }
            thread::sleep(Duration::from_millis(1));
        };
        if let Some(all_saw) = all_saw {
            to_observers.push(ms(all_saw - resigned_at));
        }
    }
    (Samples::new(to_leader), Samples::new(to_observers))
}

/// `deaths` leaders killed in a child process while this process campaigns.
fn deaths_of(store: &Store, deaths: usize) -> Samples {
    let client = store.client();
    let election = client.election(NAME).expect("valid");
    let (word, address) = store.word();
    let mut samples = Vec::new();
    for round in 0..deaths {
        let mut leader = ChildProcess::start("child-leader", &[word, address]);
        assert_eq!(leader.line(), "leading");
        let (led, told) = mpsc::channel();
        let waiting = election.clone();
        let candidate = thread::spawn(move || {
            let leadership = waiting.campaign("parent").expect("leads");
            let _ = led.send(Instant::now());
            leadership
        });
        // Killed at a moment that moves across the server's 100 ms session ticks from round to
        // round, as kazoo's leaders are: a session expires at the tick after its timeout.
        thread::sleep(Duration::from_millis(50 + (round as u64 * 37) % 100));
        let killed_at = Instant::now();
        leader.kill();
        let led_at = told.recv().expect("this process leads");
        samples.push(ms(led_at - killed_at));
        candidate
            .join()
            .expect("no panic")
            .resign()
            .expect("resigned");
    }
    Samples::new(samples)
}

/// The child half of `death`: leads, says so, and waits to be killed.
fn child_leader(word: &str, address: &str) {
    let store = match word {
        "redis" => Store::Redis(address.to_owned()),
        _ => Store::ZooKeeper(address.to_owned()),
    };
    let client = store.client();
    child::ready();
    let _leadership = client
        .election(NAME)
        .expect("valid")
        .campaign("child")
        .expect("leads");
    println!("leading");
    loop {
        thread::sleep(Duration::from_secs(1));
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// kazoo's figures, from `kazoo_election.py` on the same ZooKeeper.
fn kazoo(
    hosts: &str,
    rounds: usize,
    deaths: usize,
    figure: &dyn Fn(&str) -> bool,
) -> Result<Figures, String> {
    let mut command = Command::new("python3");
    command
        .arg(SCRIPT)
        .arg(hosts)
        .arg(rounds.to_string())
        .arg(deaths.to_string());
    command.arg(format!("{}", LEASE.as_secs_f64()));
    for word in ["resign", "death"] {
        if figure(word) {
            command.arg(word);
        }
    }
    let output = command
        .output()
        .map_err(|error| format!("not run: python3: {error}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("No module named 'kazoo'") {
        return Err("not run: pip install kazoo".into());
    }
    if !output.status.success() {
        return Err(format!("failed: {}", stderr.lines().last().unwrap_or("")));
    }
    let mut figures = Figures::default();
    for line in output.stdout.lines().map_while(Result::ok) {
        let mut words = line.split_whitespace();
        let Some(what) = words.next() else { continue };
        let samples = Samples::new(words.filter_map(|word| word.parse().ok()).collect());
        match what {
            "resign" => figures.resign = Some(samples),
            "observed" => figures.observed = Some(samples),
            "death" => figures.death = Some(samples),
            _ => {}
        }
    }
    Ok(figures)
}
