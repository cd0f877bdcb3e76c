//! `lease run --permits N`, `--read` and `--write`, `--fair`, and `lease status` of a semaphore:
//! never more runs at once than the primitive allows, on a real server.

mod tool;

use std::fs;
use std::process::Child;
use std::time::Duration;
use testkit::RedisServer;
use tool::{finish, lease, output, scratch, shell, spawn, stderr_of, stdout_of};

const USAGE: i32 = 64;

/// The most runs that overlapped, from lines `start <who>` and `end <who>` in run order.
fn most_at_once(log: &str) -> (usize, usize) {
    let (mut now, mut most, mut runs) = (0usize, 0, 0);
    for line in log.lines() {
        if line.starts_with("start") {
            now += 1;
            runs += 1;
            most = most.max(now);
        } else {
            now -= 1;
        }
    }
    (most, runs)
}

#[test]
fn at_most_n_runs_hold_a_semaphore_at_once() {
    let server = RedisServer::start();
    let (_dir, log) = scratch("log");
    let script = "echo start $LEASE_TOKEN >> FILE; sleep 0.4; echo end $LEASE_TOKEN >> FILE";
    let runs: Vec<Child> = (0..5)
        .map(|_| {
            spawn(
                lease(&server.url())
                    .args([
                        "--lease",
                        "2s",
                        "run",
                        "--permits",
                        "2",
                        "--wait",
                        "30s",
                        "jobs",
                    ])
                    .args(shell(script, &log)),
            )
        })
        .collect();
    // While they run, status counts the permits.
    std::thread::sleep(Duration::from_millis(200));
    let status = output(lease(&server.url()).args(["status", "--permits", "2", "jobs", "--json"]));
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&status)).expect("json");
    assert_eq!(json["kind"], "semaphore", "{json}");
    assert!(
        json["permits_in_use"]
            .as_u64()
            .is_some_and(|held| held <= 2),
        "{json}"
    );
    for run in runs {
        let done = finish(run, Duration::from_secs(30));
        assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    }
    let log = fs::read_to_string(&log).expect("the runs wrote");
    let (most, runs) = most_at_once(&log);
    assert_eq!(runs, 5, "{log}");
    assert!(most <= 2, "{most} runs at once:\n{log}");
    let free = output(lease(&server.url()).args(["status", "--permits", "2", "jobs"]));
    let text = stdout_of(&free);
    assert!(text.contains("0 of 2 permits held, 2 free"), "{text}");
}

#[test]
fn readers_share_and_writers_run_alone() {
    let server = RedisServer::start();
    let (_dir, log) = scratch("log");
    let script = "echo start >> FILE; sleep 0.3; echo end >> FILE";
    let mut runs: Vec<(bool, Child)> = Vec::new();
    for i in 0..6 {
        let side = if i % 3 == 0 { "--write" } else { "--read" };
        let stamp = if side == "--write" {
            script.replace("start", "start-w").replace("end", "end-w")
        } else {
            script.to_owned()
        };
        runs.push((
            side == "--write",
            spawn(
                lease(&server.url())
                    .args(["--lease", "2s", "run", side, "--wait", "30s", "table"])
                    .args(shell(&stamp, &log)),
            ),
        ));
    }
    for (_, run) in runs {
        let done = finish(run, Duration::from_secs(30));
        assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    }
    let log = fs::read_to_string(&log).expect("the runs wrote");
    // A writer's start is followed by its own end, nothing between.
    let lines: Vec<&str> = log.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if *line == "start-w" {
            assert_eq!(
                lines.get(i + 1),
                Some(&"end-w"),
                "a writer overlapped:\n{log}"
            );
        }
    }
    let (most, runs) = most_at_once(&log.replace("-w", ""));
    assert_eq!(runs, 6, "{log}");
    assert!(most <= 4, "{log}");
}

#[test]
fn primitive_flags_are_checked() {
    let server = RedisServer::start();
    for args in [
        &["run", "--permits", "2", "--read", "x", "--", "true"][..],
        &["run", "--read", "--write", "x", "--", "true"],
        &["run", "--permits", "0", "x", "--", "true"],
        &["run", "--permits", "many", "x", "--", "true"],
    ] {
        let done = output(lease(&server.url()).args(args));
        assert_eq!(
            done.status.code(),
            Some(USAGE),
            "{args:?}: {}",
            stderr_of(&done)
        );
    }
    // A semaphore's name taken as a lock is a data error, named.
    let holder =
        spawn(lease(&server.url()).args(["run", "--permits", "3", "mixed", "--", "sleep", "2"]));
    std::thread::sleep(Duration::from_millis(500));
    let done = output(lease(&server.url()).args(["run", "--wait", "0", "mixed", "--", "true"]));
    assert_eq!(done.status.code(), Some(65), "{}", stderr_of(&done));
    let done = finish(holder, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
}

#[test]
fn a_run_declaring_another_number_of_permits_than_the_holders_exits_64_until_resized() {
    let server = RedisServer::start();
    let holder =
        spawn(lease(&server.url()).args(["run", "--permits", "3", "exports", "--", "sleep", "3"]));
    testkit::wait_until(
        "the first run holds a permit",
        Duration::from_secs(10),
        || {
            let status = output(lease(&server.url()).args(["status", "--permits", "3", "exports"]));
            stdout_of(&status).contains("1 of 3 permits held")
        },
    );
    let drifted = [
        "run",
        "--permits",
        "5",
        "--wait",
        "0",
        "exports",
        "--",
        "true",
    ];
    let done = output(lease(&server.url()).args(drifted));
    let said = stderr_of(&done);
    assert_eq!(done.status.code(), Some(USAGE), "{said}");
    assert!(
        said.contains("declared 3 permits") && said.contains("acquisition 5"),
        "{said}"
    );
    let resized = output(lease(&server.url()).args(["resize", "--permits", "5", "exports"]));
    assert_eq!(resized.status.code(), Some(0), "{}", stderr_of(&resized));
    assert_eq!(stdout_of(&resized).trim(), "\"exports\": 5 permits (was 3)");
    let done = output(lease(&server.url()).args(drifted));
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    let old = [
        "run",
        "--permits",
        "3",
        "--wait",
        "0",
        "exports",
        "--",
        "true",
    ];
    let done = output(lease(&server.url()).args(old));
    assert_eq!(done.status.code(), Some(USAGE), "{}", stderr_of(&done));
    let done = finish(holder, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
}
