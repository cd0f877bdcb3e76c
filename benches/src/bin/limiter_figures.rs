//! The rate limiter beside its floor and Redisson's script, in one run against a redis-server
//! the binary starts:
//!
//! - `throughput`: grants per second from 8 and 64 threads, each taking one grant after
//!   another for a few seconds of a limit they never reach: the raw fixed window (`INCR` and
//!   `EXPIRE` of the second's key, pipelined in one round trip, a connection per thread),
//!   Redisson's `RRateLimiter` script (`benches/redisson/rate_limiter.lua`, by `EVALSHA`, a
//!   connection per thread), and this limiter as a sliding window and as a cell rate (one
//!   client, its calls pipelined on one connection), with the server's CPU per grant. The kinds
//!   run in turn within each round; ratios are taken within a round, and medians of the rounds
//!   printed.
//! - `wake`: a blocked `acquire` of a limiter of one grant per 20 ms, again and again: how long
//!   after the moment its slot frees it is granted (on the store's clock: the next grant's time
//!   less the last one's and the window) and has returned (the host's clock, which the store
//!   shares).
//!
//! Run: `cargo run --release -p benches --bin limiter_figures [quick] [throughput] [wake]`.
#![allow(clippy::print_stdout)]

use benches::figures::{loadavg, median, quantile, Request};
use redis::Commands;
use redis_lease::{Client, RateLimiter};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use testkit::RedisServer;

/// Redisson's acquisition script, copied with its commit and licence named.
const REDISSON: &str = include_str!("../../redisson/rate_limiter.lua");

struct Scale {
    rounds: usize,
    run: Duration,
    wakes: usize,
}

/// Who takes the grants.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Floor,
    Redisson,
    Window,
    Cell,
    Unpipelined,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Floor,
        Kind::Redisson,
        Kind::Window,
        Kind::Cell,
        Kind::Unpipelined,
    ];

    fn label(self) -> &'static str {
        match self {
            Kind::Floor => "floor: `INCR` + `EXPIRE`, fixed window",
            Kind::Redisson => "Redisson `RRateLimiter` script",
            Kind::Window => "**redis-lease**, sliding window",
            Kind::Cell => "**redis-lease**, cell rate",
            Kind::Unpipelined => "redis-lease, sliding window, `pipelining(false)`",
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let request = Request::from_args(&args);
    let scale = if request.quick {
        Scale {
            rounds: 1,
            run: Duration::from_millis(200),
            wakes: 10,
        }
    } else {
        Scale {
            rounds: 3,
            run: Duration::from_secs(3),
            wakes: 200,
        }
    };
    println!("load at start: {}", loadavg());
    let server = RedisServer::start();
    if request.wants("throughput") {
        throughput(&server, &scale);
    }
    if request.wants("wake") {
        wake(&server, &scale);
    }
    println!();
    println!("load at end: {}", loadavg());
}

/// CPU seconds the server has used.
fn server_cpu(server: &RedisServer) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query(&mut server.connection())
        .expect("INFO cpu");
    info.lines()
        .filter_map(|line| {
            let value = line
                .strip_prefix("used_cpu_sys:")
                .or_else(|| line.strip_prefix("used_cpu_user:"))?;
            value.trim().parse::<f64>().ok()
        })
        .sum()
}

fn millis_now() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after the epoch")
            .as_millis(),
    )
    .expect("a near time")
}

/// One thread's way of taking a grant: `true` if granted.
type Taker = Box<dyn FnMut() -> bool + Send>;

/// The limiters of the runs: a sliding window and a cell rate on one client whose calls are
/// pipelined, and a sliding window on one whose calls take a pooled connection each.
struct Limiters {
    window: RateLimiter,
    cell: RateLimiter,
    unpipelined: RateLimiter,
}

/// A taker of `kind` for one thread.
fn taker(kind: Kind, url: &str, limiters: &Limiters) -> Taker {
    let connect = || {
        redis::Client::open(url)
            .and_then(|client| client.get_connection())
            .expect("a connection")
    };
    match kind {
        Kind::Floor => {
            let mut con = connect();
            Box::new(move || {
                let key = format!("floor:{}", millis_now() / 1000);
                let (count, _): (u64, bool) = redis::pipe()
                    .cmd("INCR")
                    .arg(&key)
                    .cmd("EXPIRE")
                    .arg(&key)
                    .arg(2)
                    .query(&mut con)
                    .expect("INCR + EXPIRE");
                count <= u64::MAX / 2
            })
        }
        Kind::Redisson => {
            let mut con = connect();
            let script = redis::Script::new(REDISSON);
            let client_id = format!("{:016x}", rand_u64());
            Box::new(move || {
                let id = rand_u64().to_le_bytes();
                let wait: Option<i64> = script
                    .key("redisson")
                    .key("{redisson}:value")
                    .key(format!("{{redisson}}:value:{client_id}"))
                    .key("{redisson}:permits")
                    .key(format!("{{redisson}}:permits:{client_id}"))
                    .arg(1)
                    .arg(millis_now())
                    .arg(&id[..])
                    .invoke(&mut con)
                    .expect("Redisson's script");
                wait.is_none()
            })
        }
        Kind::Window | Kind::Cell | Kind::Unpipelined => {
            let limiter = match kind {
                Kind::Cell => limiters.cell.clone(),
                Kind::Unpipelined => limiters.unpipelined.clone(),
                _ => limiters.window.clone(),
            };
            Box::new(move || limiter.try_acquire(1).expect("reachable").is_some())
        }
    }
}

/// A number that differs from call to call and process to process.
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    RandomState::new().hash_one(NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The server's time in commands (`INFO commandstats`: calls and µs of each command, a script
/// with the commands it calls), since the last reset.
fn command_micros(server: &RedisServer) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .expect("INFO commandstats");
    info.lines()
        .filter(|line| !line.starts_with("cmdstat_info:") && !line.starts_with("cmdstat_config"))
        .filter_map(|line| {
            let usec = line.split(",usec=").nth(1)?.split(',').next()?;
            usec.parse::<f64>().ok()
        })
        .sum()
}

/// What `threads` takers of `kind` did: grants per second, the server's CPU µs per grant, its
/// µs in commands per grant, and this process's CPU µs per grant.
fn run(
    kind: Kind,
    threads: usize,
    server: &RedisServer,
    limiters: &Limiters,
    scale: &Scale,
) -> (f64, f64, f64, f64) {
    let url = server.url();
    let takers: Vec<Taker> = (0..threads).map(|_| taker(kind, &url, limiters)).collect();
    let granted = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = takers
        .into_iter()
        .map(|mut take| {
            let (granted, stop, start) =
                (Arc::clone(&granted), Arc::clone(&stop), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                let mut mine = 0;
                while !stop.load(Ordering::Relaxed) {
                    if take() {
                        mine += 1;
                    }
                }
                granted.fetch_add(mine, Ordering::SeqCst);
            })
        })
        .collect();
    server.reset_stats();
    let cpu = server_cpu(server);
    let own = benches::cpu::process_seconds();
    start.wait();
    let started = Instant::now();
    thread::sleep(scale.run);
    stop.store(true, Ordering::SeqCst);
    for handle in handles {
        handle.join().expect("a taker ends");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let grants = granted.load(Ordering::SeqCst) as f64;
    let cpu = server_cpu(server) - cpu;
    let own = benches::cpu::process_seconds() - own;
    let commands = command_micros(server);
    (
        grants / elapsed,
        cpu / grants * 1e6,
        commands / grants,
        own / grants * 1e6,
    )
}

fn throughput(server: &RedisServer, scale: &Scale) {
    let client = Client::builder(server.url())
        .build()
        .expect("valid settings");
    let unpipelined = Client::builder(server.url())
        .pipelining(false)
        .build()
        .expect("valid settings");
    // Limits no run reaches: what is measured is what a grant costs.
    let limiters = Limiters {
        window: client
            .rate_limiter("window", 100_000, Duration::from_secs(1))
            .expect("valid"),
        cell: client
            .cell_rate_limiter("cell", 1_000_000, Duration::from_secs(1), 1_000_000)
            .expect("valid"),
        unpipelined: unpipelined
            .rate_limiter("unpipelined", 100_000, Duration::from_secs(1))
            .expect("valid"),
    };
    let () = server
        .connection()
        .hset_multiple(
            "redisson",
            &[("rate", "1000000000"), ("interval", "1000"), ("type", "0")],
        )
        .expect("Redisson's trySetRate");
    for threads in [8, 64] {
        println!();
        println!(
            "## {threads} threads, {:?} per run, {} rounds",
            scale.run, scale.rounds
        );
        println!(
            "| kind | grants/s | / floor (rounds) | / Redisson (rounds) | server CPU µs / grant | in commands | client CPU µs / grant |"
        );
        println!("|---|---|---|---|---|---|---|");
        let mut rounds: Vec<Vec<(f64, f64, f64, f64)>> = Vec::new();
        for _ in 0..scale.rounds {
            rounds.push(
                Kind::ALL
                    .iter()
                    .map(|&kind| run(kind, threads, server, &limiters, scale))
                    .collect(),
            );
        }
        for (index, kind) in Kind::ALL.iter().enumerate() {
            let of = |which: usize| -> Vec<f64> {
                rounds
                    .iter()
                    .map(|round| round[index].0 / round[which].0)
                    .collect()
            };
            let show = |ratios: Vec<f64>| {
                let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
                format!("{:.2} ({})", median(ratios), shown.join(", "))
            };
            println!(
                "| {} | {:.0} | {} | {} | {:.1} | {:.1} | {:.1} |",
                kind.label(),
                median(rounds.iter().map(|round| round[index].0).collect()),
                show(of(0)),
                show(of(1)),
                median(rounds.iter().map(|round| round[index].1).collect()),
                median(rounds.iter().map(|round| round[index].2).collect()),
                median(rounds.iter().map(|round| round[index].3).collect()),
            );
        }
    }
}

fn wake(server: &RedisServer, scale: &Scale) {
    let client = Client::builder(server.url())
        .build()
        .expect("valid settings");
    let window = Duration::from_millis(20);
    println!();
    println!(
        "## A blocked acquire: past the moment its slot frees, {} waits, one grant per {window:?}",
        scale.wakes
    );
    println!("| limiter | granted after, p50 / p99 / max (store's clock) | returned after, p50 / p99 / max |");
    println!("|---|---|---|");
    let limiters = [
        (
            "sliding window",
            client
                .rate_limiter("wake-window", 1, window)
                .expect("valid"),
        ),
        (
            "cell rate, burst 1",
            client
                .cell_rate_limiter("wake-cell", 1, window, 1)
                .expect("valid"),
        ),
    ];
    for (label, limiter) in limiters {
        let mut granted_after = Vec::with_capacity(scale.wakes);
        let mut returned_after = Vec::with_capacity(scale.wakes);
        let mut last = limiter.acquire(1).expect("reachable").granted_at();
        for _ in 0..scale.wakes {
            let next = limiter.acquire(1).expect("reachable").granted_at();
            let returned = SystemTime::now();
            let frees = last + window;
            granted_after.push(next.duration_since(frees).expect("never early"));
            returned_after.push(returned.duration_since(frees).unwrap_or_default());
            last = next;
        }
        granted_after.sort();
        returned_after.sort();
        let show = |sorted: &[Duration]| {
            format!(
                "{:.3} / {:.3} / {:.3} ms",
                quantile(sorted, 0.5).as_secs_f64() * 1e3,
                quantile(sorted, 0.99).as_secs_f64() * 1e3,
                sorted[sorted.len() - 1].as_secs_f64() * 1e3
            )
        };
        println!(
            "| {label} | {} | {} |",
            show(&granted_after),
            show(&returned_after)
        );
    }
}
