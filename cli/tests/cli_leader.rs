//! `lease run --value` leads an election while its command runs, one run at a time, each with a
//! higher term as $LEASE_TOKEN; `lease leader` shows who leads (once, as JSON, or as it
//! changes), and `lease status --election` the term and value.

mod tool;

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;
use testkit::RedisServer;
use tool::{finish, lease, output, scratch, shell, spawn, stderr_of, stdout_of};

const USAGE: i32 = 64;

/// A `lease run --value VALUE` of `script` on `server` that waits up to 30 s to lead.
fn leading_run(server: &RedisServer, value: &str, script: &str, log: &Path) -> Child {
    spawn(
        lease(&server.url())
            .args([
                "--lease",
                "2s",
                "run",
                "--value",
                value,
                "--wait",
                "30s",
                "scheduler",
            ])
            .args(shell(script, log)),
    )
}

#[test]
fn runs_lead_one_at_a_time_with_rising_terms_and_leader_shows_them() {
    let server = RedisServer::start();
    let (_dir, log) = scratch("log");
    let nobody = output(lease(&server.url()).args(["leader", "scheduler"]));
    assert_eq!(nobody.status.code(), Some(1), "{}", stderr_of(&nobody));
    assert_eq!(stdout_of(&nobody).trim(), "\"scheduler\": no leader");
    let mut follower = lease(&server.url())
        .args(["leader", "scheduler", "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the lease binary");
    let (sent, followed) = std::sync::mpsc::channel();
    let stdout = follower.stdout.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = sent.send(line);
        }
    });
    let parse = |line: String| -> (Option<u64>, Option<String>) {
        let json: serde_json::Value = serde_json::from_str(&line).expect("json");
        (
            json["term"].as_u64(),
            json["value"].as_str().map(str::to_owned),
        )
    };
    // The follower's first look, before any run starts: what it saw before the first leader.
    let mut seen = vec![parse(
        followed
            .recv_timeout(Duration::from_secs(10))
            .expect("the follower prints what it sees first"),
    )];

    let script = "echo start $LEASE_TOKEN >> FILE; sleep 0.5; echo end $LEASE_TOKEN >> FILE";
    let first = leading_run(&server, "host-a", script, &log);
    testkit::wait_until("the first run leads", Duration::from_secs(10), || {
        fs::read_to_string(&log).is_ok_and(|log| log.contains("start"))
    });
    let shown = output(lease(&server.url()).args(["leader", "scheduler", "--json"]));
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&shown)).expect("json");
    assert_eq!(
        (json["leader"].as_bool(), json["value"].as_str()),
        (Some(true), Some("host-a"))
    );
    let status = output(lease(&server.url()).args(["status", "--election", "scheduler"]));
    let text = stdout_of(&status);
    assert!(
        text.contains("(election) held by") && text.contains("value \"host-a\""),
        "{text}"
    );
    let second = leading_run(&server, "host-b", script, &log);
    for run in [first, second] {
        let done = finish(run, Duration::from_secs(30));
        assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    }
    let log = fs::read_to_string(&log).expect("the runs wrote");
    let lines_of_log: Vec<&str> = log.lines().collect();
    assert_eq!(lines_of_log.len(), 4, "{log}");
    let term = |line: &str| -> u64 {
        line.rsplit(' ')
            .next()
            .and_then(|t| t.parse().ok())
            .expect("a term")
    };
    assert!(
        lines_of_log[0].starts_with("start") && lines_of_log[1].starts_with("end"),
        "{log}"
    );
    assert!(term(lines_of_log[2]) > term(lines_of_log[0]), "{log}");

    // The follower saw no leader, host-a's term, host-b's higher term (with no leader between
    // them if it looked in time), and no leader: in order.
    let host_b = |seen: &[(Option<u64>, Option<String>)]| {
        seen.iter()
            .any(|(_, value)| value.as_deref() == Some("host-b"))
    };
    while !host_b(&seen) || seen.last() != Some(&(None, None)) {
        let line = followed
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("the follower prints: {seen:?}"));
        seen.push(parse(line));
    }
    let _ = follower.kill();
    let _ = follower.wait();
    let leaders: Vec<(u64, &str)> = seen
        .iter()
        .filter_map(|(term, value)| Some(((*term)?, value.as_deref()?)))
        .collect();
    assert_eq!(seen.first(), Some(&(None, None)), "{seen:?}");
    assert!(
        matches!(leaders.as_slice(), [(a, "host-a"), (b, "host-b")] if b > a),
        "{seen:?}"
    );
}

#[test]
fn a_leading_run_refuses_lock_options() {
    let server = RedisServer::start();
    for option in [["--owner", "x"], ["--permits", "2"], ["--max-hold", "1m"]] {
        let refused = output(
            lease(&server.url())
                .args(["run", "--value", "v"])
                .args(option)
                .args(["scheduler", "--", "true"]),
        );
        assert_eq!(refused.status.code(), Some(USAGE), "{option:?}");
    }
}
