//! Runs the fault scenarios and prints the checker's table (Markdown). Exits 1 if a scenario
//! failed: an overlap, a lost update or an acquisition that failed with an error a wait does not
//! ride out inside the timing assumptions, or, anywhere, fencing broken, a lease of another
//! owner touched, or a client that ended before its time.
//!
//! `faults [--profile short|default|soak] [--minutes N] [--seed N] [--report FILE] [--only TEXT] [--keep]`
//!
//! The soak runs a random mix of the faults inside the timing assumptions, for one server, for
//! RedLock and for a Sentinel-managed primary, `--minutes` each (10 unless told).
//!
//! Needs `fault_client` beside it (`cargo build --release -p faults` builds both),
//! `redis-server` on PATH, for the ZooKeeper scenarios Debian's `zookeeper` package (run with
//! `java`, as testkit does), and for the PostgreSQL ones Debian's `postgresql-15` and
//! `pgbouncer`.

#![allow(clippy::print_stderr, clippy::print_stdout, missing_docs)]

use faults::fault::Fault;
use faults::primitive::Primitive;
use faults::profiles;
use faults::scenario::{self, Outcome, Settings};
use faults::verdict::Verdict;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|arg| arg == flag)
            .and_then(|at| args.get(at + 1))
            .cloned()
    };
    let profile = value("--profile").unwrap_or_else(|| "default".into());
    let seed: u64 = value("--seed").and_then(|s| s.parse().ok()).unwrap_or(1);
    let only = value("--only");
    let minutes: u64 = match value("--minutes").map(|m| m.parse()) {
        None => 10,
        Some(Ok(minutes)) if minutes > 0 => minutes,
        Some(_) => {
            eprintln!("faults: --minutes takes a whole number of minutes, at least 1");
            std::process::exit(64);
        }
    };
    let (clients, threads, duration, scenarios) = match profile.as_str() {
        "short" => (4, 2, Duration::from_secs(10), profiles::short()),
        "default" => (8, 2, Duration::from_secs(45), profiles::all()),
        "soak" => (8, 2, Duration::from_secs(60 * minutes), profiles::soak()),
        other => {
            eprintln!("faults: unknown profile {other:?} (short, default, soak)");
            std::process::exit(64);
        }
    };
    let client_binary = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name("fault_client"),
        Err(error) => {
            eprintln!("faults: cannot find my own path: {error}");
            std::process::exit(1);
        }
    };
    if !client_binary.is_file() {
        eprintln!(
            "faults: {} is missing: build with `cargo build --release -p faults`",
            client_binary.display()
        );
        std::process::exit(1);
    }
    let dir = std::env::temp_dir().join(format!("lease-faults-{}", std::process::id()));
    let lease = Duration::from_secs(1);
    let settings = Settings {
        clients,
        threads,
        lease,
        duration,
        every: lease * 3,
        seed,
        client_binary,
        dir: dir.clone(),
    };
    let mut lines = vec![
        format!(
            "Profile `{profile}`, seed {seed}: {clients} client processes of {threads} threads per scenario \
             ({} clients; the threads of a process share its `lease` client), {duration:?} each \
             (longer where that leaves no room for one fault and its recovery), \
             lease {lease:?} (renewed), a fault about every {:?}.",
            clients * threads,
            settings.every
        ),
        String::new(),
        "| scenario | assumptions | cycles | renewals seen | faults injected (effective) | overlaps (max ms) | stale writes accepted | stale writes refused | superseded writes accepted | token errors | leases of others touched (writes checked) | lost updates | holders told lost | told after deadline p50 / max ms | recovery max ms | observers gone back (changes seen) | verdict |".into(),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|".into(),
    ];
    // The rows of the scenarios that failed or could not run, in the table's order.
    let mut failed: Vec<String> = Vec::new();
    let mut mixes = Vec::new();
    for scenario in scenarios {
        if only
            .as_ref()
            .is_some_and(|text| !scenario.name.contains(text.as_str()))
        {
            continue;
        }
        eprintln!("faults: {}", scenario.name);
        // A panic in one scenario (a server that would not start) is reported as that
        // scenario's failure; the others still run.
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            scenario::run(&scenario, &settings)
        }))
        .unwrap_or_else(|_| Err(std::io::Error::other("it panicked")));
        match ran {
            Ok(outcome) => {
                if outcome.scenario.fault == Fault::Mix {
                    mixes.push(mix(&outcome));
                }
                if let Some(first) = outcome.touches.as_ref().and_then(|t| t.first.as_ref()) {
                    eprintln!("faults: a lease of another owner touched: {first}");
                }
                for difference in &outcome.diverged {
                    eprintln!("faults: after a failover, {difference}");
                }
                for end in &outcome.ended_early {
                    eprintln!("faults: ended before its time: {end}");
                }
                if let Some(error) = &outcome.findings.first_unexpected {
                    eprintln!(
                        "faults: {} acquisitions failed with an error a wait does not ride \
                         out, the first: {error}",
                        outcome.findings.unexpected_errors
                    );
                }
                let row = row(&outcome);
                if outcome.verdict() == Verdict::Fail {
                    failed.push(row.clone());
                }
                lines.push(row);
            }
            Err(error) => {
                let row = format!("| {} | could not run: {error} |", scenario.name);
                failed.push(row.clone());
                lines.push(row);
            }
        }
    }
    if !mixes.is_empty() {
        lines.push(String::new());
        lines.extend(mixes);
    }
    let report = lines.join("\n");
    println!("{report}");
    if let Some(path) = value("--report") {
        if let Err(error) = std::fs::write(&path, format!("{report}\n")) {
            eprintln!("faults: cannot write {path}: {error}");
        }
    }
    if args.iter().any(|arg| arg == "--keep") {
        eprintln!("faults: histories kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if !failed.is_empty() {
        // The report may go where nobody reads it (the test script discards stdout): the rows
        // that failed are also told on stderr, under the table's header.
        eprintln!("faults: {}", lines[2]);
        for line in &failed {
            eprintln!("faults: failed: {line}");
        }
        std::process::exit(1);
    }
}

fn row(outcome: &Outcome) -> String {
    let f = &outcome.findings;
    let fenced = outcome.scenario.mode.fenced();
    let dash = |text: String| if fenced { text } else { "n/a".into() };
    format!(
        "| {} | {} | {} | {} | {} ({}) | {} ({:.1}) | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        outcome.scenario.name,
        if outcome.scenario.inside {
            "inside"
        } else {
            "outside"
        },
        f.cycles,
        f.renewals,
        outcome.injected(),
        outcome.effective,
        f.overlaps,
        f.max_overlap_ms,
        dash(f.stale_accepted.to_string()),
        dash(f.stale_rejected.to_string()),
        dash(f.superseded_accepted.to_string()),
        dash(f.token_violations.to_string()),
        outcome
            .touches
            .as_ref()
            .map_or("n/a".into(), |t| format!("{} ({})", t.foreign, t.checked)),
        f.lost_updates,
        f.lost_told,
        f.lost_lateness_ms
            .map_or("-".into(), |(p50, max)| format!("{p50:.1} / {max:.1}")),
        f.recovery_max_ms
            .map_or("-".into(), |max| format!("{max:.0}")),
        if outcome.scenario.primitive == Primitive::Election {
            format!("{} ({})", f.observer_regressions, f.observed)
        } else {
            "n/a".into()
        },
        outcome.verdict(),
    )
}

/// The faults a soak drew, by kind.
fn mix(outcome: &Outcome) -> String {
    let kinds: Vec<String> = outcome
        .kinds
        .iter()
        .map(|(kind, count)| format!("{kind} {count}"))
        .collect();
    format!("- {}: {}.", outcome.scenario.name, kinds.join(", "))
}
