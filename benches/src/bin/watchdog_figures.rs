//! Prints the watchdog's figures, against a redis-server the binary starts:
//!
//! - `renewal`: many leases held by one client: renewal round trips per renewal period, leases
//!   per call, renewal lateness against the lease/3 schedule (read from the server's `MONITOR`
//!   log), threads the client added, CPU of its renewal thread, and losses (must be 0);
//! - `lost`: trials in which the server is frozen (SIGSTOP) at a random moment of a hold: how long
//!   after its local deadline the holder is told, and how long before the earliest moment its
//!   lease could have lapsed in Redis;
//! - `python`: python-redis-lock's threads for renewed locks, when Python has it.
//!
//! Run: `cargo run --release -p benches --bin watchdog_figures [quick] [SECTION...]`.
#![allow(clippy::print_stdout)]

use benches::figures::{quantile, Request};
use benches::threads::{named_thread, ThreadSample};
use redis_lease::{Client, LostReason};
use std::collections::HashMap;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};
use testkit::{Lcg, Monitored, RedisServer};

struct Scale {
    leases: usize,
    periods: u32,
    trials: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let request = Request::from_args(&args);
    let quick = request.quick;
    let wanted = |name: &str| request.wants(name);
    let scale = if quick {
        Scale {
            leases: 1_000,
            periods: 2,
            trials: 10,
        }
    } else {
        Scale {
            leases: 10_000,
            periods: 6,
            trials: 100,
        }
    };
    println!(
        "# watchdog figures ({})",
        if quick { "quick" } else { "full" }
    );
    if wanted("renewal") {
        renewal(&scale);
    }
    if wanted("lost") {
        lost(&scale);
    }
    if wanted("python") {
        python(&scale);
    }
}

fn tasks() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |tasks| tasks.count())
}

fn renewal(scale: &Scale) {
    const LEASE: Duration = Duration::from_secs(3);
    let server = RedisServer::start();
    let before = tasks();
    let client = Client::builder(server.url())
        .default_lease(LEASE)
        .build()
        .expect("valid settings");
    let client_threads = tasks() - before;
    let started = Instant::now();
    let guards: Vec<_> = (0..scale.leases)
        .map(|n| {
            client
                .lock(&format!("held-{n}"))
                .expect("valid name")
                .lock()
                .expect("free")
        })
        .collect();
    let acquiring = started.elapsed();
    // Watch whole periods once every lease has been renewed at least once.
    thread::sleep(LEASE / 3 + Duration::from_millis(200));
    let renewer = renewal_thread(&client);
    let monitor = server.monitor();
    let first = client.watchdog_metrics();
    let cpu_first = renewer.map(ThreadSample::take);
    let watch_started = Instant::now();
    let window = LEASE / 3 * scale.periods;
    thread::sleep(window);
    let last = client.watchdog_metrics();
    let cpu = renewer
        .zip(cpu_first)
        .map(|(tid, first)| ThreadSample::take(tid).since(&first, watch_started.elapsed()));
    let log = monitor.stop();
    let threads_holding = tasks() - before;
    drop(guards);

    let calls = last.renewal_calls - first.renewal_calls;
    let sent = last.renewals_sent - first.renewals_sent;
    let rounds = renewal_rounds(&log, LEASE / 6);
    println!();
    println!(
        "## {} leases of {LEASE:?} held by one client (renewed every {:?}, batch 100)",
        scale.leases,
        LEASE / 3
    );
    println!(
        "acquired in {acquiring:.2?}; watched {} periods ({window:?})",
        scale.periods
    );
    println!("| figure | value |");
    println!("|---|---|");
    match (rounds.first(), rounds.last()) {
        (Some(fewest), Some(most)) => {
            println!(
                "| renewal calls per period ({} whole rounds seen; min..max) | {}..{} |",
                rounds.len(),
                fewest.0,
                most.0
            );
            let leases: Vec<usize> = rounds.iter().map(|round| round.1).collect();
            println!(
                "| leases renewed per period (min..max) | {}..{} |",
                leases.iter().min().unwrap_or(&0),
                leases.iter().max().unwrap_or(&0)
            );
        }
        _ => println!("| renewal calls per period | no whole round seen |"),
    }
    println!(
        "| leases per call | {:.1} |",
        sent as f64 / calls.max(1) as f64
    );
    println!(
        "| failed calls, lost leases | {}, {} |",
        last.failed_calls, last.lost
    );
    if let Some(cpu) = cpu {
        println!("| renewal thread CPU | {:.2}% |", cpu.cpu_percent);
    }
    println!("| threads the client added (built) | {client_threads} |");
    println!(
        "| threads the client added (holding {} leases) | {threads_holding} |",
        scale.leases
    );
    let lateness = renewal_lateness(&log, LEASE / 3);
    if lateness.is_empty() {
        println!("| renewal lateness | no renewal seen |");
    } else {
        println!(
            "| renewal lateness vs lease/3, p50 / p99 / max (negative: early; {} renewals) | {:.1} / {:.1} / {:.1} ms |",
            lateness.len(),
            quantile(&lateness, 0.5),
            quantile(&lateness, 0.99),
            lateness[lateness.len() - 1],
        );
        println!("| renewal lateness, min | {:.1} ms |", lateness[0]);
    }
}

/// The thread id of the client's renewal thread (`lease-renew-` and the client id's start).
fn renewal_thread(client: &Client) -> Option<u64> {
    let name = format!("lease-renew-{}", &client.id()[..8]);
    // Thread names are cut to 15 bytes in /proc.
    named_thread(&name[..15])
}

/// For every lease renewed twice in the log, the gap between consecutive renewals (server
/// arrival of the calls) less a third of the lease, in milliseconds, sorted.
fn renewal_lateness(log: &[Monitored], third: Duration) -> Vec<f64> {
    let mut last_seen: HashMap<&str, u64> = HashMap::new();
    let mut lateness = Vec::new();
    for (at_micros, keys) in renewal_calls(log) {
        for key in keys {
            if let Some(previous) = last_seen.insert(key, at_micros) {
                let gap = at_micros.saturating_sub(previous) as f64 / 1000.0;
                lateness.push(gap - third.as_secs_f64() * 1000.0);
            }
        }
    }
    lateness.sort_by(f64::total_cmp);
    lateness
}

/// The renewal rounds in the log, as (calls, leases) each, sorted by calls: renewal calls are
/// grouped into rounds where more than `gap` separates two calls, and the first and last groups,
/// which the log may have cut, are left out.
fn renewal_rounds(log: &[Monitored], gap: Duration) -> Vec<(usize, usize)> {
    let gap = gap.as_micros() as u64;
    let mut rounds: Vec<(usize, usize)> = Vec::new();
    let mut last_at = None;
    for (at_micros, keys) in renewal_calls(log) {
        match last_at {
            Some(at) if at_micros.saturating_sub(at) <= gap => {
                if let Some(round) = rounds.last_mut() {
                    round.0 += 1;
                    round.1 += keys.len();
                }
            }
            _ => rounds.push((1, keys.len())),
        }
        last_at = Some(at_micros);
    }
    let whole = rounds.len().saturating_sub(2);
    let mut whole: Vec<(usize, usize)> = rounds.into_iter().skip(1).take(whole).collect();
    whole.sort();
    whole
}

/// The renewal script calls clients sent, in the log's order: when each arrived, and the lock
/// keys it renewed.
fn renewal_calls(log: &[Monitored]) -> Vec<(u64, Vec<&str>)> {
    let renew_sha = renew_sha();
    log.iter()
        .filter(|command| !command.from_script)
        .filter_map(|command| {
            let [name, sha, keys, rest @ ..] = command.args.as_slice() else {
                return None;
            };
            if name != "evalsha" || *sha != renew_sha {
                return None;
            }
            let count: usize = keys.parse().unwrap_or(0);
            let keys = rest.iter().take(count).map(String::as_str).collect();
            Some((command.at_micros, keys))
        })
        .collect()
}

fn renew_sha() -> String {
    redis::Script::new(include_str!(
        "../../../lease/src/stores/redis/scripts/renew.lua"
    ))
    .get_hash()
    .to_owned()
}

fn lost(scale: &Scale) {
    const LEASE: Duration = Duration::from_millis(300);
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .default_lease(LEASE)
        .command_timeout(Duration::from_secs(1))
        .build()
        .expect("valid settings");
    let mut random = Lcg(7);
    let mut late = Vec::new();
    let mut margin = Vec::new();
    let (mut early, mut wrong_reason, mut untold) = (0, 0, 0);
    for trial in 0..scale.trials {
        let guard = client
            .lock(&format!("trial-{trial}"))
            .expect("valid name")
            .lock()
            .expect("free");
        let signal = guard.lost_signal();
        thread::sleep(Duration::from_millis(
            random.below(LEASE.as_millis() as u64),
        ));
        server.pause();
        match signal.recv_timeout(LEASE * 4) {
            Ok(lost) => {
                let told = Instant::now();
                if told < lost.valid_until {
                    early += 1;
                }
                if lost.reason != LostReason::Unconfirmed {
                    wrong_reason += 1;
                }
                late.push(told.saturating_duration_since(lost.valid_until));
                // valid_until = sent + lease - drift: the lease cannot lapse in Redis before
                // sent + lease, as Redis ran the command after it was sent.
                let earliest_lapse = lost.valid_until + lease_drift(LEASE);
                margin.push(signed_millis(earliest_lapse, told));
            }
            Err(_) => untold += 1,
        }
        server.resume();
        drop(guard);
    }
    late.sort();
    margin.sort_by(f64::total_cmp);
    println!();
    println!(
        "## lost-detection: {} trials, lease {LEASE:?}, redis frozen (SIGSTOP) at a random moment of the hold, 1 ms tick",
        scale.trials
    );
    println!("| figure | p50 | p99 | max |");
    println!("|---|---|---|---|");
    if !late.is_empty() {
        println!(
            "| told after the local deadline | {:.2?} | {:.2?} | {:.2?} |",
            quantile(&late, 0.5),
            quantile(&late, 0.99),
            late[late.len() - 1]
        );
        println!(
            "| told before the earliest possible lapse (ms; p50, p1, min) | {:.2} | {:.2} | {:.2} |",
            quantile(&margin, 0.5),
            quantile(&margin, 0.01),
            margin[0]
        );
    }
    println!(
        "told before the deadline: {early}; reason other than Unconfirmed: {wrong_reason}; never told: {untold}"
    );
}

/// `later - earlier` in milliseconds, negative if `later` is earlier.
fn signed_millis(later: Instant, earlier: Instant) -> f64 {
    match later.checked_duration_since(earlier) {
        Some(ahead) => ahead.as_secs_f64() * 1000.0,
        None => -(earlier.duration_since(later).as_secs_f64() * 1000.0),
    }
}

/// The drift allowance the watchdog takes off a lease (1% plus 2 ms).
fn lease_drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

fn python(scale: &Scale) {
    let server = RedisServer::start();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/renewal_threads.py");
    let locks = (scale.leases / 10).to_string();
    let output = Command::new("python3")
        .args([script, &server.url(), &locks])
        .output();
    println!();
    println!("## python-redis-lock, auto_renewal=True");
    match output {
        Ok(output) if output.status.success() => {
            print!("{}", String::from_utf8_lossy(&output.stdout));
        }
        _ => println!("not run: `pip install python-redis-lock redis`"),
    }
}
