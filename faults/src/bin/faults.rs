//! Runs the fault scenarios and prints the checker's table (Markdown). Exits 1 if a scenario
//! failed: an overlap or a lost update inside the timing assumptions, or fencing broken anywhere.
//!
//! `faults [--profile short|default] [--seed N] [--report FILE] [--only TEXT] [--keep]`
//!
//! Needs `fault_client` beside it (`cargo build --release -p faults` builds both) and
//! `redis-server` on PATH.

#![allow(clippy::print_stderr, clippy::print_stdout, missing_docs)]

use faults::scenario::{self, Outcome, Settings};
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
    let (clients, duration) = match profile.as_str() {
        "short" => (4, Duration::from_secs(10)),
        "default" => (8, Duration::from_secs(60)),
        other => {
            eprintln!("faults: unknown profile {other:?} (short, default)");
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
        lease,
        duration,
        every: lease * 3,
        seed,
        client_binary,
        dir: dir.clone(),
    };
    let mut lines = vec![
        format!(
            "Profile `{profile}`, seed {seed}: {clients} client processes per scenario, {duration:?} each, \
             lease {lease:?} (renewed), a fault about every {:?}.",
            settings.every
        ),
        String::new(),
        "| scenario | assumptions | cycles | faults injected | overlaps (max ms) | stale writes accepted | stale writes refused | superseded writes accepted | token errors | lost updates | holders told lost | told after deadline p50 / max ms | recovery max ms | verdict |".into(),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|".into(),
    ];
    let mut failed = false;
    for scenario in scenario::all() {
        if only
            .as_ref()
            .is_some_and(|text| !scenario.name.contains(text.as_str()))
        {
            continue;
        }
        eprintln!("faults: {}", scenario.name);
        match scenario::run(&scenario, &settings) {
            Ok(outcome) => {
                failed |= outcome.verdict() == "FAIL";
                lines.push(row(&outcome));
            }
            Err(error) => {
                failed = true;
                lines.push(format!("| {} | could not run: {error} |", scenario.name));
            }
        }
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
    if failed {
        std::process::exit(1);
    }
}

fn row(outcome: &Outcome) -> String {
    let f = &outcome.findings;
    let fenced = outcome.scenario.mode == scenario::Mode::Single;
    let dash = |text: String| if fenced { text } else { "n/a".into() };
    format!(
        "| {} | {} | {} | {} | {} ({:.1}) | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        outcome.scenario.name,
        if outcome.scenario.inside {
            "inside"
        } else {
            "outside"
        },
        f.cycles,
        outcome.injected,
        f.overlaps,
        f.max_overlap_ms,
        dash(f.stale_accepted.to_string()),
        dash(f.stale_rejected.to_string()),
        dash(f.superseded_accepted.to_string()),
        dash(f.token_violations.to_string()),
        f.lost_updates,
        f.lost_told,
        f.lost_lateness_ms
            .map_or("-".into(), |(p50, max)| format!("{p50:.1} / {max:.1}")),
        f.recovery_max_ms
            .map_or("-".into(), |max| format!("{max:.0}")),
        outcome.verdict(),
    )
}
