//! `lease run --rate N/DURATION` and `lease status` of a rate limiter on real servers: no more
//! runs start in a window than the rate allows (their command's side effects counted), a wait
//! starts a run once a slot frees and Ctrl-C stops it, `-E` sets the code of a run not started, bad rates are usage
//! errors, and ZooKeeper, which offers no rate limiter, says so.

mod pg;
mod tool;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use testkit::{RedisServer, ZooKeeper};
use tool::{bare, lease, output, scratch, stderr_of, stdout_of};

const USAGE: i32 = 64;
const NOT_NOW: i32 = 75;

/// `lease run --rate RATE NAME` of a command that appends a line to `file`, with `extra` flags;
/// NAME is `api-2-per-10s` for `2/10s`.
fn rated(lease: &mut Command, rate: &str, extra: &[&str], file: &Path) -> std::process::Output {
    let name = format!("api-{}", rate.replace('/', "-per-"));
    output(
        lease
            .args(["run", "--rate", rate])
            .args(extra)
            .arg(name)
            .args(tool::shell("date +%s%N >> FILE", file)),
    )
}

fn lines(file: &Path) -> usize {
    fs::read_to_string(file).unwrap_or_default().lines().count()
}

/// Three runs at 2 in 10 s: two start, the third does not, and status shows the limiter.
fn two_of_three_start(lease: &dyn Fn() -> Command) {
    let (_dir, file) = scratch("runs");
    for n in 1..=2 {
        let ran = rated(&mut lease(), "2/10s", &[], &file);
        assert_eq!(ran.status.code(), Some(0), "{}", stderr_of(&ran));
        assert_eq!(lines(&file), n);
    }
    let refused = rated(&mut lease(), "2/10s", &[], &file);
    assert_eq!(refused.status.code(), Some(NOT_NOW), "{refused:?}");
    assert_eq!(lines(&file), 2, "the third run started");
    let said = stderr_of(&refused);
    assert!(
        said.contains("2 runs started within the last 10s already")
            && said.contains("the next slot frees in"),
        "{said}"
    );
    // -E: a run not started counts as a success, and still does not start.
    let skipped = rated(&mut lease(), "2/10s", &["-q", "-E", "0"], &file);
    assert_eq!(skipped.status.code(), Some(0), "{skipped:?}");
    assert_eq!(stderr_of(&skipped), "");
    assert_eq!(lines(&file), 2, "a skipped run started");
    // Another rate while these runs count: refused, saying which is stored and what to do.
    let other = output(
        lease()
            .args(["run", "--rate", "5/10s", "api-2-per-10s"])
            .args(tool::shell("date +%s%N >> FILE", &file)),
    );
    assert_eq!(other.status.code(), Some(USAGE), "{other:?}");
    assert_eq!(lines(&file), 2, "a run at another rate started");
    let said = stderr_of(&other);
    assert!(
        said.contains("is limited to --rate 2/10s while its runs count, not 5/10s")
            && !said.contains("reconfigure"),
        "{said}"
    );
    let status = output(lease().args(["status", "api-2-per-10s"]));
    assert_eq!(status.status.code(), Some(0), "none available: {status:?}");
    let text = stdout_of(&status);
    assert!(
        text.contains(
            "rate limiter, 2 per 10s window, 2 granted that count now, 0 available, \
                       next grant in "
        ),
        "{text}"
    );
    let json = output(lease().args(["status", "--json", "api-2-per-10s"]));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(json["kind"], "rate limiter", "{json}");
    assert_eq!(json["limit"]["mode"], "window", "{json}");
    assert_eq!(json["limit"]["limit"], 2, "{json}");
    assert_eq!(json["limit"]["window_ms"], 10_000, "{json}");
    assert_eq!(
        (json["used"].clone(), json["available"].clone()),
        (2.into(), 0.into())
    );
    let next = json["next_in_ms"].as_u64().expect("a next grant");
    assert!(next > 0 && next <= 10_000, "{json}");
}

/// At 1 a second, a run that waits starts once the first's slot frees, not before.
fn a_wait_starts_once_a_slot_frees(lease: &dyn Fn() -> Command) {
    let (_dir, file) = scratch("waits");
    let first = rated(&mut lease(), "1/1s", &[], &file);
    assert_eq!(first.status.code(), Some(0), "{}", stderr_of(&first));
    let began = Instant::now();
    let waited = rated(&mut lease(), "1/1s", &["--wait", "30s"], &file);
    assert_eq!(waited.status.code(), Some(0), "{}", stderr_of(&waited));
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
    let stamps = tool::stamps(&file);
    assert_eq!(stamps.len(), 2, "{stamps:?}");
    // A second apart by the store's clock, which is this machine's: a generous margin below.
    assert!(
        stamps[1] - stamps[0] >= 900_000_000,
        "the second run started {} ns after the first",
        stamps[1] - stamps[0]
    );
}

#[test]
fn runs_at_a_rate_on_redis() {
    let server = RedisServer::start();
    let url = server.url();
    two_of_three_start(&|| lease(&url));
    a_wait_starts_once_a_slot_frees(&|| lease(&url));
}

#[test]
fn ctrl_c_stops_a_wait_for_a_slot_promptly() {
    let server = RedisServer::start();
    let url = server.url();
    let (_dir, file) = scratch("runs");
    let first = rated(&mut lease(&url), "1/1m", &[], &file);
    assert_eq!(first.status.code(), Some(0), "{}", stderr_of(&first));
    let mut waiter = lease(&url)
        .args([
            "-v",
            "run",
            "--rate",
            "1/1m",
            "--wait",
            "5m",
            "api-1-per-1m",
        ])
        .args(tool::shell("date +%s%N >> FILE", &file))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the lease binary");
    // Its log says when it waits, its signals caught: then Ctrl-C. (A wait shorter than the
    // minute to the next slot would give up at once.)
    let (said, heard) = std::sync::mpsc::channel();
    let stderr = waiter.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = said.send(line);
        }
    });
    let mut log = Vec::new();
    while !log
        .iter()
        .any(|line: &String| line.contains("waiting up to 5m for a slot"))
    {
        match heard.recv_timeout(Duration::from_secs(10)) {
            Ok(line) => log.push(line),
            Err(_) => panic!("no wait said: {log:?}"),
        }
    }
    let pid = Pid::from_raw(i32::try_from(waiter.id()).expect("a pid"));
    let sent = Instant::now();
    kill(pid, Signal::SIGINT).expect("signal the waiter");
    let deadline = sent + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = waiter.try_wait().expect("poll the waiter") {
            break status;
        }
        assert!(Instant::now() < deadline, "the wait did not stop");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(status.code(), Some(128 + 2), "{status:?}");
    assert_eq!(lines(&file), 1, "the interrupted run started");
}

#[test]
fn runs_at_a_rate_on_postgres() {
    let server = pg::server();
    let url = server.scram_url();
    two_of_three_start(&|| pg::lease(&url));
    a_wait_starts_once_a_slot_frees(&|| pg::lease(&url));
}

#[test]
fn bad_rates_and_lock_flags_beside_a_rate_are_usage_errors() {
    let url = format!("redis://127.0.0.1:{}", tool::closed_port());
    let (_dir, file) = scratch("never");
    let rates = [
        "10",
        "10/",
        "/1m",
        "0/1m",
        "10/0s",
        "x/1m",
        "10/60",
        "10/1m/2",
        "-1/1m",
        "+5/1m",
        "10/1 m",
        "100001/1m",
        "10/2y",
        "1.5/1m",
    ];
    for rate in rates {
        let refused = rated(&mut lease(&url), rate, &[], &file);
        let said = stderr_of(&refused);
        assert_eq!(refused.status.code(), Some(USAGE), "{rate}: {said}");
        assert!(!said.contains("panicked"), "{rate}: {said}");
    }
    for flag in [
        &["--permits", "3"][..],
        &["--fair"],
        &["--value", "v"],
        &["--owner", "o"],
    ] {
        let refused = rated(&mut lease(&url), "2/1m", flag, &file);
        assert_eq!(refused.status.code(), Some(USAGE), "{flag:?}: {refused:?}");
        assert!(
            stderr_of(&refused).contains("cannot be used with"),
            "{refused:?}"
        );
    }
    assert_eq!(lines(&file), 0);
}

#[test]
fn zookeeper_refuses_a_rate_clearly() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let (_dir, file) = scratch("never");
    let mut command = bare();
    command.env("LEASE_ZOOKEEPER", zk.connect_string());
    let refused = rated(&mut command, "2/10s", &[], &file);
    assert_eq!(refused.status.code(), Some(USAGE), "{refused:?}");
    let said = stderr_of(&refused);
    assert!(said.contains("a rate limiter is not offered on"), "{said}");
    assert_eq!(lines(&file), 0);
}
