//! `lease run` on a ZooKeeper ensemble of three whose leader is frozen (SIGSTOP) past the
//! session timeout, or killed, while one holder runs a job and three waiters queue behind it:
//! the holder either keeps its session and finishes, or is stopped and says why (exit 79); the
//! waiters ride out the election and the reconnections and then run one at a time, with rising
//! tokens, none before the holder's job has stopped.
//!
//! A leader frozen past the session timeout that wakes before its followers leave it expires the
//! sessions it did not hear of, although its followers kept answering them: outside the
//! assumptions (see the guarantees' ZooKeeper section), where jobs may overlap for as long as
//! their holders take to learn it. There the tool still never stops a job without saying why.
//!
//! Each timeline runs once; `LEASE_FREEZE_RUNS=N` runs each N times.
// Outside the assumptions it reports the overlaps it measured, on stderr.
#![allow(clippy::print_stderr)]

mod tool;

use std::fs;
use std::path::Path;
use std::process::{Child, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use testkit::ZooKeeperEnsemble;
use tool::{bare, finish, scratch, spawn, stderr_of};

const LOST: i32 = 79;

/// One timeline at a time: three JVMs and four tools each are what two cores can take.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What is done to the leader.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGSTOP for this long, then SIGCONT.
    Freeze(Duration),
    /// SIGKILL, then started again with its data after this long.
    Kill(Duration),
}

fn lease(connect: &str) -> std::process::Command {
    let mut command = bare();
    command.env("LEASE_ZOOKEEPER", connect);
    command
}

fn runs() -> usize {
    std::env::var("LEASE_FREEZE_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .unwrap_or(1)
}

/// The timeline: a lease (session timeout) of 4 s, a 12 s job, three waiters of 0.5 s jobs with a
/// wait of 120 s, the leader hit half a second after they queue. Every job beats (its token and
/// the time) every 50 ms; with `exclusive`, never two at once.
fn timeline(extra_cfg: &[&str], fault: Fault, exclusive: bool) {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut ensemble = ZooKeeperEnsemble::start_with(3, extra_cfg);
    let connect = ensemble.connect_string();
    let (_dir, beats) = scratch("beats");
    let holder = spawn(
        lease(&connect)
            .args(["--lease", "4s", "run", "--wait", "30s", "job"])
            .args(beating(240, &beats)),
    );
    let started = Instant::now();
    while !beats.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the holder never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let waiters: Vec<Child> = (0..3)
        .map(|_| {
            spawn(
                lease(&connect)
                    .args(["--lease", "4s", "run", "--wait", "120s", "job"])
                    .args(beating(10, &beats)),
            )
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let leader = ensemble.leader();
    match fault {
        Fault::Freeze(pause) => {
            ensemble.pause(leader);
            std::thread::sleep(pause);
            ensemble.resume(leader);
        }
        Fault::Kill(down) => {
            ensemble.stop(leader);
            std::thread::sleep(down);
            ensemble.start_again(leader);
        }
    }
    let mut said = Vec::new();
    let runs: Vec<Output> = std::iter::once(finish(holder, Duration::from_secs(60)))
        .chain(
            waiters
                .into_iter()
                .map(|w| finish(w, Duration::from_secs(120))),
        )
        .collect();
    for run in &runs {
        said.push(format!("{:?}: {}", run.status.code(), stderr_of(run)));
    }
    let said = said.join("\n");
    check_turns(&beats, &said, exclusive);
    for run in &runs {
        match run.status.code() {
            Some(0) => {}
            Some(LOST) => assert!(
                ["no renewal of \"job\"", "lost the lease on \"job\""]
                    .iter()
                    .any(|why| stderr_of(run).contains(why)),
                "stopped without saying why:\n{said}"
            ),
            _ => panic!("a run exited with neither 0 nor 79:\n{said}"),
        }
    }
}

/// A job of `count` beats: each appends its token and the time to `beats`, 50 ms apart.
fn beating(count: u32, beats: &Path) -> Vec<String> {
    let script = format!(
        "i=0; while [ $i -lt {count} ]; do echo $LEASE_TOKEN $(date +%s%N) >> {}; \
         sleep 0.05; i=$((i+1)); done",
        beats.display()
    );
    vec!["--".into(), "sh".into(), "-c".into(), script]
}

/// No two jobs beat at once: once a job has beaten, no job of a lower token beats again, and
/// every token is a job's own (it rises from job to job). Without `exclusive`, the longest
/// overlap is only reported (on stderr, in ms).
fn check_turns(beats: &Path, said: &str, exclusive: bool) {
    let log = fs::read_to_string(beats).expect("the jobs beat");
    let mut beats: Vec<(u128, u64)> = log
        .lines()
        .filter_map(|line| {
            let (token, at) = line.split_once(' ')?;
            Some((at.parse().ok()?, token.parse().ok()?))
        })
        .collect();
    beats.sort_unstable();
    let mut highest = 0;
    let mut since = 0;
    let mut longest = None;
    for &(at, token) in &beats {
        if token > highest {
            highest = token;
            since = at;
        }
        if token != highest {
            let overlap = (at - since) / 1_000_000;
            assert!(
                !exclusive,
                "token {token} beat {overlap} ms after token {highest} began:\n{said}"
            );
            longest = longest.max(Some(overlap));
        }
    }
    if let Some(overlap) = longest {
        eprintln!("jobs overlapped, the longest by {overlap} ms");
    }
    let jobs: std::collections::BTreeSet<u64> = beats.iter().map(|&(_, token)| token).collect();
    assert!(jobs.len() >= 2, "the waiters never ran:\n{said}");
}

#[test]
fn a_leader_frozen_past_the_session_timeout_is_ridden_out_after_an_election() {
    for _ in 0..runs() {
        timeline(&[], Fault::Freeze(Duration::from_secs(6)), true);
    }
}

#[test]
fn a_leader_killed_and_started_again_is_ridden_out() {
    for _ in 0..runs() {
        timeline(&[], Fault::Kill(Duration::from_secs(6)), true);
    }
}

#[test]
fn a_leader_woken_to_expire_sessions_never_has_a_job_stopped_without_a_word() {
    // ZooKeeper's default timing: the followers wait 10 s for their leader, so none is elected
    // during the 6 s freeze, and the leader expires the sessions it did not hear of when it wakes.
    let defaults = [
        "tickTime=2000",
        "initLimit=10",
        "syncLimit=5",
        "minSessionTimeout=4000",
    ];
    for _ in 0..runs() {
        timeline(&defaults, Fault::Freeze(Duration::from_secs(6)), false);
    }
}
