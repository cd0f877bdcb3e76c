//! Prints the figures of `redis-lease`'s ZooKeeper lock beside kazoo's `Lock` (Python), both on
//! one standalone ZooKeeper that the binary starts (`testkit::ZooKeeper`, its transaction log
//! fsynced: ZooKeeper's default), in one run:
//!
//! - `uncontended`: one thread, one client, one lock reused: acquire + release pairs per second;
//!   per pair, the time the server spent answering its requests (arrival to reply) and in fsync,
//!   the requests and writes it counted, and the client's CPU (all its threads);
//! - `contended`: 8 threads on one name, one client shared by the threads, a lock handle each
//!   (kazoo's `Lock` is per thread), an empty critical section: critical sections per second, the
//!   fewest and most sections of a thread (fairness), hand-offs (consecutive sections by
//!   different threads), and per section the requests the server counted and the client's CPU;
//! - `handoff`: hand-off across two processes: the holder keeps the lock 10 ms and stamps the
//!   wall clock just before its release; the waiter, another process with its own client
//!   already waiting to acquire, stamps when it holds the lock; the latency is the difference
//!   (p50, p99, max). For `redis-lease` the waiter is this binary run again as
//!   `zk_figures child-waiter HOSTS`.
//!
//! The server's counts come from its `mntr` command (over each figure's measured window, all
//! its clients). kazoo's side is `benches/python/kazoo_lock.py`, run by `python3` on the same
//! server right after `redis-lease`'s side of each figure; without kazoo its rows say "not run:
//! pip install kazoo". Each figure is one Markdown table with both rows and the ratio
//! lease / kazoo. The machine's load (`/proc/loadavg`) is printed at the start and the end: the
//! figures depend on it, and on the disk's fsync latency.
//!
//! Run: `cargo run --release -p benches --bin zk_figures [quick] [FIGURE...] [lease|kazoo]`:
//! 5 s per figure and 500 hand-off rounds, or with `quick` 300 ms and 20 rounds (the smoke run
//! of `scripts/test`); all three figures and both sides unless some are named.
#![allow(clippy::print_stdout)]

use benches::figures::{loadavg, quantile, Request};
use benches::handoff;
use parking_lot::Mutex;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};
use testkit::ZooKeeper;

const THREADS: usize = 8;
/// How long a holder keeps the lock before a hand-off, so the waiter is surely waiting.
const HOLD: Duration = Duration::from_millis(10);
const LEASE: Duration = Duration::from_secs(10);
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/python/kazoo_lock.py");

struct Scale {
    /// How long the uncontended and the contended figures each run.
    run: Duration,
    /// Hand-off rounds.
    rounds: usize,
}

/// The uncontended figure.
struct Uncontended {
    pairs_per_s: f64,
    requests_per_pair: f64,
    writes_per_pair: f64,
    cpu_us_per_pair: f64,
    /// The server's time answering the pair's requests, arrival to reply.
    server_ms_per_pair: f64,
    /// Of which in fsync.
    fsync_ms_per_pair: f64,
}

/// The 8-thread figure.
struct Contended {
    sections_per_s: f64,
    min: u64,
    max: u64,
    handoffs: u64,
    sections: u64,
    requests_per_section: f64,
    cpu_us_per_section: f64,
}

/// The hand-off figure, in ms.
struct Handoff {
    p50: f64,
    p99: f64,
    max: f64,
}

/// One lock's figures (each absent when not asked for).
#[derive(Default)]
struct Figures {
    uncontended: Option<Uncontended>,
    contended: Option<Contended>,
    handoff: Option<Handoff>,
}

impl Figures {
    /// Takes the figures `measured` has.
    fn add(&mut self, measured: Figures) {
        self.uncontended = measured.uncontended.or(self.uncontended.take());
        self.contended = measured.contended.or(self.contended.take());
        self.handoff = measured.handoff.or(self.handoff.take());
    }
}

/// The figures, and the sides, that a run measures.
const FIGURES: [&str; 3] = ["uncontended", "contended", "handoff"];
const SIDES: [&str; 2] = ["lease", "kazoo"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("child-waiter") {
        child_waiter(&args[1]);
        return;
    }
    let quick = Request::from_args(&args).quick;
    // The names given of `choices`, or all of them when none is given.
    let named = |choices: &[&'static str]| -> Vec<&'static str> {
        let given: Vec<&'static str> = choices
            .iter()
            .copied()
            .filter(|choice| args.iter().any(|arg| arg == choice))
            .collect();
        if given.is_empty() {
            choices.to_vec()
        } else {
            given
        }
    };
    let (figures, sides) = (named(&FIGURES), named(&SIDES));
    let scale = if quick {
        Scale {
            run: Duration::from_millis(300),
            rounds: 20,
        }
    } else {
        Scale {
            run: Duration::from_secs(5),
            rounds: 500,
        }
    };
    println!(
        "# ZooKeeper lock figures ({})",
        if quick { "quick" } else { "full" }
    );
    println!();
    println!("load at start (/proc/loadavg): {}", loadavg());
    let server = ZooKeeper::start();
    let hosts = server.connect_string();
    // Figure by figure, lease then kazoo, so that both sides of a figure run under the same
    // conditions, a few seconds apart.
    let mut lease = Figures::default();
    let mut kazoo = sides.contains(&"kazoo").then(|| Ok(Figures::default()));
    for &figure in &figures {
        if sides.contains(&"lease") {
            match figure {
                "uncontended" => lease.uncontended = Some(uncontended(&hosts, scale.run)),
                "contended" => lease.contended = Some(contended(&hosts, scale.run)),
                _ => lease.handoff = Some(handoff_across_processes(&hosts, scale.rounds)),
            }
        }
        if let Some(Ok(found)) = &mut kazoo {
            match kazoo_figure(&hosts, &scale, figure) {
                Ok(measured) => found.add(measured),
                Err(reason) => kazoo = Some(Err(reason)),
            }
        }
    }
    print_tables(&lease, kazoo.as_ref(), &scale, &figures);
    println!();
    println!("load at end (/proc/loadavg): {}", loadavg());
}

fn client(hosts: &str) -> redis_lease::Client {
    redis_lease::Client::zookeeper([hosts])
        .default_lease(LEASE)
        .build()
        .expect("valid settings")
}

/// What the server has counted, from all its clients: requests received, writes, and the
/// milliseconds it spent answering writes and reads, and in fsync. By the `mntr` four-letter
/// command, which every testkit server allows.
#[derive(Clone, Copy)]
struct ServerCounts {
    received: f64,
    writes: f64,
    /// Answering writes and reads, each request from its arrival to its reply.
    answering_ms: f64,
    fsync_ms: f64,
}

impl ServerCounts {
    fn now(hosts: &str) -> ServerCounts {
        let first = hosts.split(',').next().unwrap_or(hosts);
        let mut conn = TcpStream::connect(first).expect("the server listens");
        conn.write_all(b"mntr").expect("mntr sent");
        let mut reply = String::new();
        conn.read_to_string(&mut reply).expect("mntr answered");
        let field = |name: &str| -> f64 {
            reply
                .lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix('\t'))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {name} in mntr's reply: {reply}"))
        };
        ServerCounts {
            received: field("zk_packets_received"),
            writes: field("zk_cnt_updatelatency"),
            answering_ms: field("zk_sum_updatelatency") + field("zk_sum_readlatency"),
            fsync_ms: field("zk_sum_fsynctime"),
        }
    }

    /// What was counted since `earlier`, divided by `per` (pairs or critical sections).
    fn since(self, earlier: ServerCounts, per: f64) -> ServerCounts {
        let per = per.max(1.0);
        ServerCounts {
            received: (self.received - earlier.received) / per,
            writes: (self.writes - earlier.writes) / per,
            answering_ms: (self.answering_ms - earlier.answering_ms) / per,
            fsync_ms: (self.fsync_ms - earlier.fsync_ms) / per,
        }
    }
}

/// One thread, one client, one lock reused: pairs for `run` after a short warm-up.
fn uncontended(hosts: &str, run: Duration) -> Uncontended {
    let client = client(hosts);
    let lock = client.lock("uncontended").expect("valid name");
    let pair = || lock.lock().expect("acquired").unlock().expect("released");
    let warm = Instant::now() + (run / 10).min(Duration::from_millis(500));
    while Instant::now() < warm {
        pair();
    }
    let counts = ServerCounts::now(hosts);
    let cpu = benches::cpu::process_seconds();
    let began = Instant::now();
    let mut pairs = 0u64;
    while began.elapsed() < run {
        pair();
        pairs += 1;
    }
    let elapsed = began.elapsed().as_secs_f64();
    let cpu = benches::cpu::process_seconds() - cpu;
    let server = ServerCounts::now(hosts).since(counts, pairs as f64);
    Uncontended {
        pairs_per_s: pairs as f64 / elapsed,
        requests_per_pair: server.received,
        writes_per_pair: server.writes,
        cpu_us_per_pair: cpu / pairs.max(1) as f64 * 1e6,
        server_ms_per_pair: server.answering_ms,
        fsync_ms_per_pair: server.fsync_ms,
    }
}

/// A critical section: the thread that ran it, and its hold's fencing token.
type Section = (u8, Option<u64>);

/// `THREADS` threads of one client on one name, each with its own lock handle, for `run`. The
/// sections are recorded in the order they ran, with their fencing tokens, which must grow.
fn contended(hosts: &str, run: Duration) -> Contended {
    let client = client(hosts);
    let order: Arc<Mutex<Vec<Section>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|id| {
            let lock = client.lock("contended").expect("valid name");
            let (order, stop, start) = (order.clone(), stop.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let guard = lock.lock().expect("acquired");
                    order.lock().push((id as u8, guard.fencing_token()));
                    guard.unlock().expect("released");
                }
            })
        })
        .collect();
    let counts = ServerCounts::now(hosts);
    start.wait();
    let began = Instant::now();
    let cpu = benches::cpu::process_seconds();
    thread::sleep(run);
    stop.store(true, Ordering::Relaxed);
    let counted = order.lock().len();
    let elapsed = began.elapsed().as_secs_f64();
    let cpu = benches::cpu::process_seconds() - cpu;
    let server = ServerCounts::now(hosts).since(counts, counted as f64);
    for thread in threads {
        thread.join().expect("no panic");
    }
    let order = order.lock();
    let order = &order[..counted];
    let mut per_thread = [0u64; THREADS];
    for &(id, _) in order {
        per_thread[id as usize] += 1;
    }
    let tokens: Vec<u64> = order.iter().filter_map(|&(_, token)| token).collect();
    if tokens.windows(2).any(|pair| pair[0] >= pair[1]) {
        println!("(warning: fencing tokens did not grow from one critical section to the next)");
    }
    let sections = counted.max(1) as f64;
    Contended {
        sections_per_s: counted as f64 / elapsed,
        min: per_thread.iter().copied().min().unwrap_or(0),
        max: per_thread.iter().copied().max().unwrap_or(0),
        handoffs: order
            .windows(2)
            .filter(|pair| pair[0].0 != pair[1].0)
            .count() as u64,
        sections: counted as u64,
        requests_per_section: server.received,
        cpu_us_per_section: cpu / sections * 1e6,
    }
}

/// The waiter is this binary run again with its own client. Both sides stamp with the system
/// clock, which both processes of one host share.
fn handoff_across_processes(hosts: &str, rounds: usize) -> Handoff {
    let holder = client(hosts);
    let lock = holder.lock("handoff").expect("valid name");
    let mut samples = handoff::across_processes(&[hosts], &lock, rounds, HOLD);
    samples.sort_by(f64::total_cmp);
    Handoff {
        p50: quantile(&samples, 0.5),
        p99: quantile(&samples, 0.99),
        max: samples[samples.len() - 1],
    }
}

/// The child side: the waiter of [`handoff_across_processes`].
fn child_waiter(hosts: &str) {
    let client = client(hosts);
    handoff::serve_waiter(&client.lock("handoff").expect("valid name"));
}

/// kazoo's `figure` by `benches/python/kazoo_lock.py`, or why there is none.
fn kazoo_figure(hosts: &str, scale: &Scale, figure: &str) -> Result<Figures, String> {
    let has_kazoo = Command::new("python3")
        .args(["-c", "import kazoo"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !has_kazoo {
        return Err("not run: pip install kazoo".to_owned());
    }
    let output = Command::new("python3")
        .args([
            SCRIPT,
            hosts,
            &scale.rounds.to_string(),
            &scale.run.as_secs_f64().to_string(),
        ])
        .arg(figure)
        .output()
        .map_err(|error| format!("not run: python3: {error}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().last().unwrap_or("no message");
        return Err(format!("failed: {last}"));
    }
    let mut figures = Figures::default();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some((figure, values)) = fields.split_first() else {
            continue;
        };
        let numbers: Vec<f64> = values.iter().filter_map(|v| v.parse().ok()).collect();
        match (*figure, numbers.as_slice()) {
            (
                "uncontended",
                &[pairs_per_s, requests_per_pair, writes_per_pair, cpu_us_per_pair, server_ms_per_pair, fsync_ms_per_pair],
            ) => {
                figures.uncontended = Some(Uncontended {
                    pairs_per_s,
                    requests_per_pair,
                    writes_per_pair,
                    cpu_us_per_pair,
                    server_ms_per_pair,
                    fsync_ms_per_pair,
                });
            }
            (
                "contended8",
                &[sections_per_s, min, max, handoffs, sections, requests_per_section, cpu_us_per_section],
            ) => {
                figures.contended = Some(Contended {
                    sections_per_s,
                    min: min as u64,
                    max: max as u64,
                    handoffs: handoffs as u64,
                    sections: sections as u64,
                    requests_per_section,
                    cpu_us_per_section,
                });
            }
            ("handoff-processes", &[p50, p99, max]) => {
                figures.handoff = Some(Handoff { p50, p99, max });
            }
            _ => {}
        }
    }
    Ok(figures)
}

/// `lease / kazoo`, to two decimals.
fn ratio(lease: f64, kazoo: f64) -> String {
    if kazoo > 0.0 {
        format!("{:.2}", lease / kazoo)
    } else {
        "–".to_owned()
    }
}

/// One figure's table: its title and header, then the lease row, the kazoo row (or why there is
/// none) and the ratios, each row as its cells.
struct Table<'a, F> {
    title: String,
    header: &'a [&'a str],
    lease: Option<&'a F>,
    kazoo: Result<Option<&'a F>, &'a str>,
    cells: fn(&F) -> Vec<String>,
    ratios: fn(&F, &F) -> Vec<String>,
}

impl<F> Table<'_, F> {
    fn print(&self) {
        println!();
        println!("## {}", self.title);
        println!("| lock | {} |", self.header.join(" | "));
        println!("|---|{}", "---|".repeat(self.header.len()));
        let row = |name: &str, cells: Vec<String>| println!("| {name} | {} |", cells.join(" | "));
        if let Some(lease) = self.lease {
            row("lease", (self.cells)(lease));
        }
        match self.kazoo {
            Ok(Some(kazoo)) => {
                row("kazoo", (self.cells)(kazoo));
                if let Some(lease) = self.lease {
                    row("lease / kazoo", (self.ratios)(lease, kazoo));
                }
            }
            Ok(None) => {}
            Err(reason) => {
                let mut cells = vec![String::new(); self.header.len()];
                cells[0] = reason.to_owned();
                row("kazoo", cells);
            }
        }
    }
}

/// kazoo's row of a figure: absent when kazoo was not asked for, or why it is missing.
fn kazoo_row<'a, F>(
    kazoo: Option<&'a Result<Figures, String>>,
    pick: impl Fn(&'a Figures) -> Option<&'a F>,
) -> Result<Option<&'a F>, &'a str> {
    match kazoo {
        None => Ok(None),
        Some(Err(reason)) => Err(reason),
        Some(Ok(figures)) => pick(figures)
            .map(Some)
            .ok_or("no figure in the script's output"),
    }
}

fn print_tables(
    lease: &Figures,
    kazoo: Option<&Result<Figures, String>>,
    scale: &Scale,
    figures: &[&str],
) {
    if figures.contains(&"uncontended") {
        Table {
            title: format!(
                "uncontended acquire + release, one thread, one client, one lock reused ({:?})",
                scale.run
            ),
            header: &[
                "pairs/s",
                "ms per pair",
                "of which the server answering (in fsync)",
                "server requests per pair",
                "writes per pair",
                "client CPU µs per pair",
            ],
            lease: lease.uncontended.as_ref(),
            kazoo: kazoo_row(kazoo, |k| k.uncontended.as_ref()),
            cells: |f: &Uncontended| {
                vec![
                    format!("{:.0}", f.pairs_per_s),
                    format!("{:.3}", 1e3 / f.pairs_per_s),
                    format!("{:.3} ({:.3})", f.server_ms_per_pair, f.fsync_ms_per_pair),
                    format!("{:.2}", f.requests_per_pair),
                    format!("{:.2}", f.writes_per_pair),
                    format!("{:.0}", f.cpu_us_per_pair),
                ]
            },
            ratios: |l, k| {
                vec![
                    ratio(l.pairs_per_s, k.pairs_per_s),
                    ratio(k.pairs_per_s, l.pairs_per_s),
                    ratio(l.server_ms_per_pair, k.server_ms_per_pair),
                    ratio(l.requests_per_pair, k.requests_per_pair),
                    ratio(l.writes_per_pair, k.writes_per_pair),
                    ratio(l.cpu_us_per_pair, k.cpu_us_per_pair),
                ]
            },
        }
        .print();
    }
    if figures.contains(&"contended") {
        Table {
            title: format!(
                "{THREADS} threads of one client on one name, a lock handle each, empty critical section ({:?})",
                scale.run
            ),
            header: &[
                "critical sections/s",
                "per thread (min..max)",
                "hand-offs",
                "passed to another thread",
                "server requests per section",
                "client CPU µs per section",
            ],
            lease: lease.contended.as_ref(),
            kazoo: kazoo_row(kazoo, |k| k.contended.as_ref()),
            cells: |f: &Contended| {
                vec![
                    format!("{:.0}", f.sections_per_s),
                    format!("{}..{}", f.min, f.max),
                    f.handoffs.to_string(),
                    format!(
                        "{:.1}%",
                        f.handoffs as f64 / f.sections.saturating_sub(1).max(1) as f64 * 100.0
                    ),
                    format!("{:.2}", f.requests_per_section),
                    format!("{:.0}", f.cpu_us_per_section),
                ]
            },
            ratios: |l, k| {
                vec![
                    ratio(l.sections_per_s, k.sections_per_s),
                    String::new(),
                    String::new(),
                    String::new(),
                    ratio(l.requests_per_section, k.requests_per_section),
                    ratio(l.cpu_us_per_section, k.cpu_us_per_section),
                ]
            },
        }
        .print();
    }
    if figures.contains(&"handoff") {
        Table {
            title: format!(
                "hand-off across two processes: release to the waiting process holding the lock ({} rounds, holder keeps it {HOLD:?})",
                scale.rounds
            ),
            header: &["p50 ms", "p99 ms", "max ms"],
            lease: lease.handoff.as_ref(),
            kazoo: kazoo_row(kazoo, |k| k.handoff.as_ref()),
            cells: |f: &Handoff| {
                vec![
                    format!("{:.3}", f.p50),
                    format!("{:.3}", f.p99),
                    format!("{:.3}", f.max),
                ]
            },
            ratios: |l, k| vec![ratio(l.p50, k.p50), ratio(l.p99, k.p99), ratio(l.max, k.max)],
        }
        .print();
    }
}
