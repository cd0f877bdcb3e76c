//! Prints the lock figures that are not criterion timings: 8 threads contending for one key
//! (critical sections per second, fairness, how often the lock passes to another thread) and
//! hand-off latency (a release to the next waiter holding the lock), for `redis-lease` and its peers in
//! one run, against a redis-server the binary starts.
//!
//! With three local masters: the same contention for `redis-lease`'s RedLock, `rslock` and `redlock`,
//! and `redis-lease`'s RedLock acquisition latency with one master frozen.
//!
//! On a local Redis Cluster (3 masters, 3 replicas): the same contention and hand-off for `redis-lease`
//! beside one server's (`cluster`), and the uncontended and contention figures again on a cluster
//! of 3 masters without replicas, with the servers' and the client's CPU per critical section.
//! And many threads on many names (`names`): 16 and 64 threads
//! of one client on 10,000 names, against `redis-benchmark` running the raw lock's two commands
//! with as many connections (the floor), on one server and on the cluster, with how many cores
//! the servers and the client (or `redis-benchmark`) kept busy.
//!
//! The floors of a hand-off by pub/sub (`wakes`): raw commands, no lock library, each way the news
//! of a release could reach the next holder (`benches/src/wake_floors.rs`), beside the spinning
//! floor and `redis-lease` across two processes, in one run.
//!
//! One call after 10 ms idle (`cold`): a lock, its unlock and the raw floor's two commands, timed
//! by the caller and by the server's slow log (`benches/src/cold_calls.rs`).
//!
//! With a primary and a replica (`acks`): the latency of a lock + unlock pair without and with
//! replica acknowledgements.
//!
//! Run: `cargo run --release -p benches --bin lock_figures [quick] [single] [redlock] [cluster]
//! [names] [wakes] [cold] [acks]`. A full run of `single` also charts the hand-off latency's
//! percentiles into `docs/plots/lock_handoff.svg`.
#![allow(clippy::print_stdout)]

use benches::cold_calls;
use benches::figures::{quantile, Request};
use benches::handoff;
use benches::lock_peers::{
    Lease, LeaseCluster, LeaseClusterNoReplicas, LeaseClusterUnpipelined, LeaseRedLock,
    LeaseUnpipelined, LockPeer, Raw, Redlock, Rslock,
};
use benches::names;
use benches::plot;
use benches::processes;
use benches::wake_floors;
use parking_lot::Mutex;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{RedisCluster, RedisServer};

const THREADS: usize = 8;

struct Scale {
    contention: Duration,
    rounds: usize,
    /// How long a holder keeps the lock before a hand-off, so the waiter is surely waiting.
    hold: Duration,
    /// Whether to draw charts into `docs/plots/` (full runs only).
    plots: bool,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("child-waiter") {
        child_waiter(&args[1]);
        return;
    }
    if args.first().map(String::as_str) == Some("child-contender") {
        processes::serve_contender(&args[1], args[2].parse().expect("a thread count"));
        return;
    }
    let request = Request::from_args(&args);
    let quick = request.quick;
    let scale = if quick {
        Scale {
            contention: Duration::from_millis(500),
            rounds: 20,
            hold: Duration::from_millis(10),
            plots: false,
        }
    } else {
        Scale {
            contention: Duration::from_secs(5),
            rounds: 500,
            hold: Duration::from_millis(10),
            plots: true,
        }
    };
    let wanted = |name: &str| request.wants(name);
    println!("# lock figures ({})", if quick { "quick" } else { "full" });
    if wanted("single") {
        single_server(&scale);
    }
    if wanted("redlock") {
        three_masters(&scale);
    }
    if wanted("cluster") {
        cluster(&scale);
    }
    if wanted("names") {
        many_names(quick);
    }
    if wanted("wakes") {
        wake_floors(&scale);
    }
    if wanted("cold") {
        cold_calls(scale.rounds);
    }
    if wanted("acks") {
        acks(scale.rounds * 10);
    }
}

/// The hand-off floors by pub/sub beside the spinning floor and `redis-lease` across processes.
fn wake_floors(scale: &Scale) {
    let server = RedisServer::start();
    let url = server.url();
    println!();
    println!(
        "## hand-off floors by pub/sub ({} rounds, holder keeps it {:?})",
        scale.rounds, scale.hold
    );
    println!("| lock | where | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|");
    handoff_in_process::<Raw>(std::slice::from_ref(&url), scale);
    handoff_across_processes(&url, scale);
    for wake in wake_floors::Wake::ALL {
        let samples = wake_floors::samples(&url, wake, scale.rounds, scale.hold);
        let (p50, p99, max) = percentiles(samples);
        println!(
            "| {} | one process | {p50:.3} | {p99:.3} | {max:.3} |",
            wake.name()
        );
    }
}

/// Each call after 10 ms idle: the caller's time and the server's.
fn cold_calls(rounds: usize) {
    let server = RedisServer::start();
    println!();
    println!(
        "## one call after {:?} idle ({rounds} rounds; server: SLOWLOG, a script with the commands it calls)",
        cold_calls::IDLE
    );
    println!("| call | caller p50 µs | server p50 µs |");
    println!("|---|---|---|");
    for figure in cold_calls::figures(&server.url(), rounds) {
        let server = figure
            .server_us
            .map_or_else(|| "-".to_owned(), |micros| micros.to_string());
        println!("| {} | {:.0} | {server} |", figure.call, figure.caller_us);
    }
}

/// The latency of an uncontended lock + unlock pair on a primary without replicas, on one with a
/// replica, and on the same with every acquisition and release waiting for the replica
/// (`replica_acks(1, ..)`).
fn acks(pairs: usize) {
    let alone = RedisServer::start();
    let primary = RedisServer::start();
    let replica = RedisServer::start();
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port())
        .query(&mut replica.connection())
        .expect("REPLICAOF");
    let synced = Instant::now() + Duration::from_secs(20);
    while !redis::cmd("INFO")
        .arg("replication")
        .query::<String>(&mut replica.connection())
        .expect("INFO")
        .contains("master_link_status:up")
    {
        assert!(Instant::now() < synced, "the replica did not sync");
        thread::sleep(Duration::from_millis(20));
    }
    println!();
    println!(
        "## replica acknowledgements: uncontended lock + unlock pairs, one thread ({pairs} pairs)"
    );
    println!("| primary | acknowledgements | p50 µs | p99 µs | pairs/s |");
    println!("|---|---|---|---|---|");
    let runs = [
        ("no replica", alone.url(), None),
        ("one replica", primary.url(), None),
        ("one replica", primary.url(), Some(1)),
    ];
    for (what, url, acks) in runs {
        let mut builder = redis_lease::Client::builder(url);
        if let Some(replicas) = acks {
            builder = builder.replica_acks(replicas, Duration::from_millis(500));
        }
        let client = builder.build().expect("valid settings");
        let lock = client.lock("acks").expect("valid");
        let pair = || {
            let guard = lock
                .with_lease(Duration::from_secs(10))
                .lock()
                .expect("free");
            guard.unlock().expect("held");
        };
        for _ in 0..pairs / 10 {
            pair();
        }
        let mut micros = Vec::with_capacity(pairs);
        let began = Instant::now();
        for _ in 0..pairs {
            let one = Instant::now();
            pair();
            micros.push(one.elapsed().as_secs_f64() * 1e6);
        }
        let rate = pairs as f64 / began.elapsed().as_secs_f64();
        micros.sort_by(f64::total_cmp);
        println!(
            "| {what} | {} | {:.0} | {:.0} | {rate:.0} |",
            acks.map_or("none".to_owned(), |n| format!("WAIT {n}")),
            quantile(&micros, 0.5),
            quantile(&micros, 0.99),
        );
    }
}

/// `redis-lease` on a local cluster beside one server: uncontended pairs, contention, hand-off.
fn cluster(scale: &Scale) {
    let server = RedisServer::start();
    let one = [server.url()];
    let cluster = RedisCluster::start(3, 1);
    let seeds = cluster.seed_urls();
    let bare = RedisCluster::start(3, 0);
    let bare_seeds = bare.seed_urls();
    println!();
    println!(
        "## uncontended lock + unlock, one thread ({} pairs)",
        scale.rounds * 10
    );
    println!("| lock | pairs/s |");
    println!("|---|---|");
    reset_stats(&[server.port()]);
    uncontended::<Lease>(&one, scale.rounds * 10);
    let one_time = server_time(&[server.port()]);
    uncontended::<LeaseCluster>(&seeds, scale.rounds * 10);
    reset_stats(&bare.ports());
    uncontended::<LeaseClusterNoReplicas>(&bare_seeds, scale.rounds * 10);
    let bare_time = server_time(&bare.ports());
    println!();
    println!("## server time per call in those uncontended runs (INFO commandstats, all nodes)");
    println!("| where | EVALSHA calls | EVALSHA µs per call | inside the scripts: CLUSTER INFO calls, µs each | INFO calls, µs each |");
    println!("|---|---|---|---|---|");
    for (place, time) in [
        ("one server", one_time),
        ("cluster without replicas", bare_time),
    ] {
        let (calls, per_call) = time.per_call("evalsha");
        let (cluster_calls, cluster_info) = time.per_call("cluster|info");
        let (info_calls, info) = time.per_call("info");
        println!(
            "| {place} | {calls} | {per_call:.1} | {cluster_calls}, {cluster_info:.1} | {info_calls}, {info:.1} |"
        );
    }
    contention_header("one server and a cluster", scale);
    let runs = [
        (
            Lease::NAME,
            busy(&[server.port()], || contention::<Lease>(&one, scale)),
        ),
        (
            LeaseCluster::NAME,
            busy(&cluster.ports(), || {
                contention::<LeaseCluster>(&seeds, scale)
            }),
        ),
        (
            LeaseClusterNoReplicas::NAME,
            busy(&bare.ports(), || {
                contention::<LeaseClusterNoReplicas>(&bare_seeds, scale)
            }),
        ),
    ];
    println!();
    println!("## CPU in those runs: cores busy, and CPU µs per critical section");
    println!("| lock | cores busy: servers + client | µs per section: servers + client |");
    println!("|---|---|---|");
    for (name, (rate, cores)) in runs {
        println!(
            "| {name} | {cores} | {:.1} + {:.1} |",
            cores.servers / rate * 1e6,
            cores.own / rate * 1e6
        );
    }
    println!();
    println!(
        "## hand-off in one process ({} rounds, holder keeps it {:?})",
        scale.rounds, scale.hold
    );
    println!("| lock | where | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|");
    handoff_in_process::<Lease>(&one, scale);
    handoff_in_process::<LeaseCluster>(&seeds, scale);
}

/// Calls and microseconds per command, summed over servers, from `INFO commandstats`.
struct ServerTime(Vec<(String, u64, u64)>);

impl ServerTime {
    /// Calls of `command` and microseconds per call (0 when never called).
    fn per_call(&self, command: &str) -> (u64, f64) {
        let (calls, usec) = self.total(command);
        (calls, usec as f64 / calls.max(1) as f64)
    }

    /// Calls of `command` and the microseconds they took in all.
    fn total(&self, command: &str) -> (u64, u64) {
        self.0
            .iter()
            .filter(|(name, _, _)| name == command)
            .fold((0, 0), |(calls, usec), (_, c, u)| (calls + c, usec + u))
    }
}

/// The section `section` of the `INFO` of the server on `port`.
fn info(port: u16, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(&mut stats_connection(port))
        .unwrap_or_else(|error| panic!("INFO {section}: {error}"))
}

fn stats_connection(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .and_then(|client| client.get_connection())
        .expect("a connection to a local server")
}

fn reset_stats(ports: &[u16]) {
    for &port in ports {
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut stats_connection(port))
            .expect("CONFIG RESETSTAT");
    }
}

fn server_time(ports: &[u16]) -> ServerTime {
    let mut all = Vec::new();
    for &port in ports {
        for line in info(port, "commandstats").lines() {
            let Some((name, fields)) = line
                .strip_prefix("cmdstat_")
                .and_then(|rest| rest.split_once(':'))
            else {
                continue;
            };
            let field = |key: &str| {
                fields
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
                    .and_then(|value| value.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            all.push((name.to_owned(), field("calls"), field("usec")));
        }
    }
    ServerTime(all)
}

fn uncontended<P: LockPeer>(urls: &[String], pairs: usize) {
    let mut peer = P::group(urls, 1).pop().expect("one handle");
    for _ in 0..pairs / 10 {
        peer.with_lock("uncontended", &mut || {});
    }
    let began = Instant::now();
    for _ in 0..pairs {
        peer.with_lock("uncontended", &mut || {});
    }
    println!(
        "| {} | {:.0} |",
        P::NAME,
        pairs as f64 / began.elapsed().as_secs_f64()
    );
}

/// 16 and 64 threads of one client on 10,000 names, against the `redis-benchmark` floor.
fn many_names(quick: bool) {
    let (run, requests) = if quick {
        (Duration::from_millis(500), 20_000)
    } else {
        (Duration::from_secs(5), 400_000)
    };
    let server = RedisServer::start();
    let cluster = RedisCluster::start(3, 1);
    println!();
    println!(
        "## threads of one client on {} names ({run:?} each) against redis-benchmark's SET NX PX + EVALSHA with as many connections",
        names::NAMES
    );
    println!("| where | threads | client | pairs/s | / floor | server µs per pair | of which in scripts | client µs per pair | server reads per pair |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut chart: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for threads in [16, 64] {
        let one = [server.port()];
        let urls = [server.url()];
        let ports = cluster.ports();
        let seeds = cluster.seed_urls();
        let masters = cluster.masters();
        for (place, ports, runs) in [
            (
                "one server",
                &one[..],
                [
                    Box::new(|| names::lease_pairs::<Lease>(&urls, threads, run))
                        as Box<dyn Fn() -> f64>,
                    Box::new(|| names::lease_pairs::<LeaseUnpipelined>(&urls, threads, run)),
                    Box::new(|| names::floor_pairs(&one, false, threads, requests)),
                ],
            ),
            (
                "cluster (3 masters)",
                &ports[..],
                [
                    Box::new(|| names::lease_pairs::<LeaseCluster>(&seeds, threads, run)),
                    Box::new(|| {
                        names::lease_pairs::<LeaseClusterUnpipelined>(&seeds, threads, run)
                    }),
                    Box::new(|| names::floor_pairs(&masters, true, threads, requests)),
                ],
            ),
        ] {
            let figures: Vec<(f64, Load)> = runs.iter().map(|run| load(ports, run)).collect();
            let floor = figures[2].0;
            for ((pairs, load), client) in
                figures
                    .iter()
                    .zip(["lease", "lease, unpipelined", "floor (redis-benchmark)"])
            {
                let line = format!("{client}, {place}");
                match chart.iter_mut().find(|(name, _)| *name == line) {
                    Some((_, points)) => points.push((threads as f64, *pairs)),
                    None => chart.push((line, vec![(threads as f64, *pairs)])),
                }
                let done = pairs * load.wall;
                println!(
                    "| {place} | {threads} | {client} | {pairs:.0} | {:.2} | {:.1} | {:.1} | {:.1} | {:.2} |",
                    pairs / floor,
                    load.cores.servers / pairs * 1e6,
                    load.script_usec / done,
                    load.cores.own / pairs * 1e6,
                    load.reads / done,
                );
            }
        }
    }
    if !quick {
        let series: Vec<plot::Series<'_>> = chart
            .iter()
            .map(|(name, points)| (name.as_str(), points.clone()))
            .collect();
        let drawn = plot::lines(
            &plot::path("lock_names"),
            &format!(
                "Threads of one client on {} names: lock + unlock pairs per second",
                names::NAMES
            ),
            "threads",
            "pairs/s",
            &series,
        );
        if let Err(error) = drawn {
            println!("(chart not written: {error})");
        }
    }
}

/// What a run cost the servers and the client.
struct Load {
    cores: Cores,
    wall: f64,
    /// Reads from a socket the servers made: fewer per pair the deeper the calls are pipelined.
    reads: f64,
    /// The servers' time in scripts (`INFO commandstats`).
    script_usec: f64,
}

/// Runs `run` (which returns pairs per second) and measures its [`Load`] on the servers on
/// `ports`.
fn load(ports: &[u16], run: &dyn Fn() -> f64) -> (f64, Load) {
    reset_stats(ports);
    let reads = servers_stat(ports, "total_reads_processed");
    let began = Instant::now();
    let (pairs, cores) = busy(ports, run);
    let load = Load {
        cores,
        wall: began.elapsed().as_secs_f64(),
        reads: servers_stat(ports, "total_reads_processed") - reads,
        script_usec: server_time(ports).total("evalsha").1 as f64,
    };
    (pairs, load)
}

/// The sum over the servers on `ports` of a counter of `INFO stats`.
fn servers_stat(ports: &[u16], field: &str) -> f64 {
    ports
        .iter()
        .map(|&port| {
            info(port, "stats")
                .lines()
                .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|value| value.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        })
        .sum()
}

/// How many cores were busy on average during a run.
struct Cores {
    /// The servers'.
    servers: f64,
    /// This process's, with the children it waited for.
    own: f64,
}

impl std::fmt::Display for Cores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.2} + {:.2}", self.servers, self.own)
    }
}

/// Runs `run`, and says how many cores were busy on average meanwhile: the servers on `ports`
/// (`INFO cpu`), and this process with the children it waited for (`/proc/self/stat`).
fn busy<T>(ports: &[u16], run: impl FnOnce() -> T) -> (T, Cores) {
    let began = Instant::now();
    let (servers, own) = (servers_cpu(ports), own_cpu());
    let value = run();
    let wall = began.elapsed().as_secs_f64();
    let cores = Cores {
        servers: (servers_cpu(ports) - servers) / wall,
        own: (own_cpu() - own) / wall,
    };
    (value, cores)
}

/// CPU seconds the servers on `ports` have used (`used_cpu_sys` + `used_cpu_user`).
fn servers_cpu(ports: &[u16]) -> f64 {
    ports
        .iter()
        .map(|&port| {
            info(port, "cpu")
                .lines()
                .filter_map(|line| {
                    let value = line
                        .strip_prefix("used_cpu_sys:")
                        .or_else(|| line.strip_prefix("used_cpu_user:"))?;
                    value.trim().parse::<f64>().ok()
                })
                .sum::<f64>()
        })
        .sum()
}

/// CPU seconds this process and its waited-for children have used (`/proc/self/stat`, in
/// Linux's fixed 100 ticks a second).
fn own_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let fields: Vec<f64> = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    // After the name and the state (not a number), the numbers start at field 4 (ppid): utime,
    // stime, cutime and cstime (fields 14 to 17) are 10 to 13 here.
    fields
        .get(10..14)
        .map_or(0.0, |ticks| ticks.iter().sum::<f64>() / 100.0)
}

fn contention_header(what: &str, scale: &Scale) {
    println!();
    println!(
        "## {THREADS} threads on one key, {what}, {:?} each, empty critical section",
        scale.contention
    );
    println!("| lock | critical sections/s | per thread (min..max) | Jain fairness | passed to another thread |");
    println!("|---|---|---|---|---|");
}

fn single_server(scale: &Scale) {
    let server = RedisServer::start();
    let url = server.url();
    let urls = [url.clone()];
    contention_header("one server", scale);
    contention::<Lease>(&urls, scale);
    contention::<Raw>(&urls, scale);
    contention::<Rslock>(&urls, scale);
    contention::<Redlock>(&urls, scale);
    two_processes(&url, scale);
    println!();
    println!(
        "## hand-off: release to the next waiter holding the lock ({} rounds, holder keeps it {:?})",
        scale.rounds, scale.hold
    );
    println!("| lock | where | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|");
    let mut series = vec![
        handoff_in_process::<Lease>(&urls, scale),
        handoff_across_processes(&url, scale),
    ];
    series.extend(handoff_python_redis_lock(&url, scale));
    series.push(handoff_in_process::<Raw>(&urls, scale));
    series.push(handoff_in_process::<Rslock>(&urls, scale));
    series.push(handoff_in_process::<Redlock>(&urls, scale));
    if scale.plots {
        let title = format!(
            "Hand-off: release to the next waiter holding the lock ({} rounds)",
            scale.rounds
        );
        let series: Vec<plot::Series<'_>> = series
            .iter()
            .map(|(name, points)| (name.as_str(), points.clone()))
            .collect();
        let chart = plot::percentiles(
            &plot::path("lock_handoff"),
            &title,
            "ms",
            HANDOFF_LEVELS,
            true,
            &series,
        );
        if let Err(error) = chart {
            println!("(chart not written: {error})");
        }
    }
}

/// Two processes of `THREADS / 2` threads each (one client per process) on one name: the
/// sections per second and each process's share.
fn two_processes(url: &str, scale: &Scale) {
    let each = THREADS / 2;
    let (here, there) = processes::two_processes(url, each, scale.contention);
    let total = here + there;
    let share = |n: u64| n as f64 / total.max(1) as f64 * 100.0;
    println!();
    println!(
        "## two processes x {each} threads on one name ({:?})",
        scale.contention
    );
    println!("| lock | sections/s | first process | second process |");
    println!("|---|---|---|---|");
    println!(
        "| lease | {:.0} | {:.1}% | {:.1}% |",
        total as f64 / scale.contention.as_secs_f64(),
        share(here),
        share(there)
    );
}

/// The percentiles of hand-off latency that the chart shows.
const HANDOFF_LEVELS: &[f64] = &[0.5, 0.9, 0.99, 1.0];

/// A hand-off chart's series for `samples` (sorted, in ms).
fn handoff_series(name: String, samples: &[f64]) -> (String, Vec<(f64, f64)>) {
    (name, plot::quantiles(samples, HANDOFF_LEVELS))
}

/// RedLock over three local masters: contention, then acquisition latency with one master
/// frozen.
fn three_masters(scale: &Scale) {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    contention_header("three masters", scale);
    contention::<LeaseRedLock>(&urls, scale);
    contention::<Rslock>(&urls, scale);
    contention::<Redlock>(&urls, scale);

    let node_timeout = Duration::from_millis(50);
    let masters = redis_lease::Client::redlock(urls.iter().cloned())
        .command_timeout(node_timeout)
        .build()
        .expect("valid settings");
    let lock = masters.lock("one-frozen").expect("valid name");
    lock.try_lock()
        .expect("reachable")
        .expect("free")
        .unlock()
        .expect("held");
    servers[0].pause();
    let mut samples = Vec::with_capacity(scale.rounds);
    for _ in 0..scale.rounds {
        let started = Instant::now();
        let guard = lock
            .try_lock()
            .expect("two masters answer")
            .expect("a quorum");
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
        guard.unlock().expect("held");
    }
    servers[0].resume();
    let (p50, p99, max) = percentiles(samples);
    println!();
    println!(
        "## lease RedLock, one of three masters frozen (SIGSTOP), node timeout {node_timeout:?}: acquisition ({} rounds)",
        scale.rounds
    );
    println!("| p50 ms | p99 ms | max ms |");
    println!("|---|---|---|");
    println!("| {p50:.3} | {p99:.3} | {max:.3} |");
}

/// Prints one row of the contention table and returns its critical sections per second.
fn contention<P: LockPeer>(urls: &[String], scale: &Scale) -> f64 {
    let name = format!("contended:{}", P::NAME);
    let order: Arc<Mutex<Vec<u8>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = P::group(urls, THREADS)
        .into_iter()
        .enumerate()
        .map(|(id, mut peer)| {
            let (order, stop, start, name) =
                (order.clone(), stop.clone(), start.clone(), name.clone());
            thread::spawn(move || {
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    peer.with_lock(&name, &mut || order.lock().push(id as u8));
                }
            })
        })
        .collect();
    start.wait();
    let began = Instant::now();
    thread::sleep(scale.contention);
    stop.store(true, Ordering::Relaxed);
    let counted = order.lock().len();
    let elapsed = began.elapsed();
    for thread in threads {
        thread.join().expect("no panic");
    }
    let order = order.lock();
    let order = &order[..counted];
    let mut per_thread = [0u64; THREADS];
    for &id in order {
        per_thread[id as usize] += 1;
    }
    let sum: f64 = per_thread.iter().map(|&n| n as f64).sum();
    let squares: f64 = per_thread.iter().map(|&n| (n as f64).powi(2)).sum();
    let jain = if squares > 0.0 {
        sum * sum / (THREADS as f64 * squares)
    } else {
        0.0
    };
    let passes = order.windows(2).filter(|pair| pair[0] != pair[1]).count();
    let passed = passes as f64 / order.len().saturating_sub(1).max(1) as f64 * 100.0;
    let rate = counted as f64 / elapsed.as_secs_f64();
    println!(
        "| {} | {rate:.0} | {}..{} | {:.3} | {:.1}% |",
        P::NAME,
        per_thread.iter().min().unwrap_or(&0),
        per_thread.iter().max().unwrap_or(&0),
        jain,
        passed
    );
    rate
}

fn percentiles(mut samples: Vec<f64>) -> (f64, f64, f64) {
    samples.sort_by(f64::total_cmp);
    (
        quantile(&samples, 0.5),
        quantile(&samples, 0.99),
        samples[samples.len() - 1],
    )
}

/// Holder and waiter are two threads of one process (for `redis-lease`, sharing one client: the local
/// queue's path). Prints the row and returns the chart's series.
fn handoff_in_process<P: LockPeer>(urls: &[String], scale: &Scale) -> (String, Vec<(f64, f64)>) {
    let name = format!("handoff:{}", P::NAME);
    let mut peers = P::group(urls, 2);
    let (mut waiter, mut holder) = (peers.pop().expect("two"), peers.pop().expect("two"));
    let (go, wait_now) = mpsc::channel::<()>();
    let (acquired_tx, acquired) = mpsc::channel::<Instant>();
    let waiter_name = name.clone();
    let waiter_thread = thread::spawn(move || {
        while wait_now.recv().is_ok() {
            let mut at = Instant::now();
            waiter.with_lock(&waiter_name, &mut || at = Instant::now());
            acquired_tx.send(at).expect("main alive");
        }
    });
    let mut samples = Vec::with_capacity(scale.rounds);
    for _ in 0..scale.rounds {
        let mut released = Instant::now();
        holder.with_lock(&name, &mut || {
            go.send(()).expect("waiter alive");
            thread::sleep(scale.hold);
            released = Instant::now();
        });
        let at = acquired
            .recv_timeout(Duration::from_secs(30))
            .expect("the waiter acquired");
        samples.push(at.saturating_duration_since(released).as_secs_f64() * 1e3);
    }
    drop(go);
    waiter_thread.join().expect("no panic");
    samples.sort_by(f64::total_cmp);
    let (p50, p99, max) = percentiles(samples.clone());
    println!(
        "| {} | one process | {p50:.3} | {p99:.3} | {max:.3} |",
        P::NAME
    );
    handoff_series(format!("{}, one process", P::NAME), &samples)
}

/// The waiter is another process with its own client, woken by pub/sub. Both sides stamp with the
/// system clock, which both processes of one host share. Prints the row and returns the chart's
/// series.
fn handoff_across_processes(url: &str, scale: &Scale) -> (String, Vec<(f64, f64)>) {
    let holder = redis_lease::Client::open(url).expect("valid settings");
    let lock = holder.lock("handoff:processes").expect("valid name");
    let mut samples = handoff::across_processes(&[url], &lock, scale.rounds, scale.hold);
    samples.sort_by(f64::total_cmp);
    let (p50, p99, max) = percentiles(samples.clone());
    println!("| lease | two processes | {p50:.3} | {p99:.3} | {max:.3} |");
    handoff_series("lease, two processes".to_owned(), &samples)
}

/// python-redis-lock (BLPOP waiting), by `benches/python/handoff.py`, when Python has it. Prints
/// its rows and returns the chart's series (p50, p99 and max only: what the script reports).
fn handoff_python_redis_lock(url: &str, scale: &Scale) -> Vec<(String, Vec<(f64, f64)>)> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/handoff.py");
    let output = Command::new("python3")
        .args([script, url, &scale.rounds.to_string()])
        .stderr(Stdio::null())
        .output();
    let lines = match output {
        Ok(output) if output.status.success() => {
            String::from_utf8_lossy(&output.stdout).into_owned()
        }
        _ => {
            println!(
                "| python-redis-lock | not run: `pip install python-redis-lock redis` | | | |"
            );
            return Vec::new();
        }
    };
    let mut series = Vec::new();
    for line in lines.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let [place, p50, p99, max] = fields.as_slice() {
            let place = place.replace('-', " ");
            println!("| python-redis-lock | {place} | {p50} | {p99} | {max} |");
            let points = [(0.5, p50), (0.99, p99), (1.0, max)]
                .into_iter()
                .filter_map(|(q, value)| Some((q, value.parse::<f64>().ok()?)))
                .collect();
            series.push((format!("python-redis-lock, {place}"), points));
        }
    }
    series
}

/// The child side: the waiter of [`handoff_across_processes`].
fn child_waiter(url: &str) {
    let client = redis_lease::Client::open(url).expect("valid settings");
    handoff::serve_waiter(&client.lock("handoff:processes").expect("valid name"));
}
