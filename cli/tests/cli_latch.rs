//! `lease latch` on real servers: a waiter opens only once the last count-down came, from other
//! processes; a count is refused while the latch counts; a wait ends at its duration, on a latch
//! not set, and at Ctrl-C, each with its own exit code; `lease status` shows a latch; bad counts
//! are usage errors. On Redis, PostgreSQL and ZooKeeper (whose servers must offer TTL nodes: the
//! tool says so on one that does not).

mod pg;
mod tool;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use testkit::{RedisServer, ZooKeeper};
use tool::{bare, finish, lease, output, stderr_of, stdout_of};

const USAGE: i32 = 64;
const NO_LATCH: i32 = 66;
const STILL_COUNTING: i32 = 73;
const NOT_NOW: i32 = 75;
const REFUSED: i32 = 78;

/// The tool with its stdout and stderr kept, started.
fn start(command: &mut Command) -> Child {
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the lease binary")
}

/// Runs the tool, checks its exit code, and gives its stdout.
fn ok(command: &mut Command) -> String {
    let done = output(command);
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    stdout_of(&done)
}

/// Waits (up to 10 s) until a waiter of the latch `name` on `server` listens for its opening.
fn listening(server: &RedisServer, name: &str) {
    let channel = format!("{{{name}}}:latch:freed");
    testkit::wait_until("the waiter listens", Duration::from_secs(10), || {
        server.subscribers(&channel) > 0
    });
}

#[test]
fn a_waiter_opens_only_after_the_last_count_down_from_other_processes() {
    let server = RedisServer::start();
    let url = server.url();
    assert_eq!(
        ok(lease(&url).args(["latch", "nightly/loaded", "--count", "3"])),
        "\"nightly/loaded\": count 3 set\n"
    );
    let mut waiter = start(lease(&url).args(["latch", "nightly/loaded", "--wait", "30s"]));
    listening(&server, "nightly/loaded");
    for left in ["2", "1"] {
        let down = ok(lease(&url).args(["latch", "nightly/loaded", "--down"]));
        assert_eq!(down.trim(), left);
        let waiting = waiter.try_wait().expect("poll the waiter");
        assert!(waiting.is_none(), "opened with {left} left: {waiting:?}");
    }
    let last = ok(lease(&url).args(["latch", "nightly/loaded", "--down"]));
    assert_eq!(last.trim(), "0");
    let done = finish(waiter, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    assert_eq!(stdout_of(&done), "\"nightly/loaded\" is at zero\n");
    // Counting down a latch at zero does nothing; -q says nothing.
    assert_eq!(
        ok(lease(&url).args(["-q", "latch", "nightly/loaded", "--down"])),
        ""
    );
}

#[test]
fn a_count_is_refused_while_the_latch_counts_down() {
    let server = RedisServer::start();
    let url = server.url();
    let set = ok(lease(&url).args(["latch", "batch", "--count", "2", "--json"]));
    let set: serde_json::Value = serde_json::from_str(&set).expect("JSON");
    assert_eq!(set["set"], true, "{set}");
    assert_eq!(set["count"], 2, "{set}");
    let refused = output(lease(&url).args(["latch", "batch", "--count", "5"]));
    assert_eq!(refused.status.code(), Some(STILL_COUNTING), "{refused:?}");
    let said = stderr_of(&refused);
    assert!(
        said.contains("\"batch\" still counts down (2 left)") && said.contains("not changed"),
        "{said}"
    );
    assert_eq!(stdout_of(&refused), "");
    // Unchanged, then settable again once at zero.
    let shown = ok(lease(&url).args(["status", "batch"]));
    assert!(shown.contains("latch, count 2"), "{shown}");
    ok(lease(&url).args(["latch", "batch", "--down"]));
    ok(lease(&url).args(["latch", "batch", "--down"]));
    ok(lease(&url).args(["latch", "batch", "--count", "5"]));
}

#[test]
fn a_wait_ends_at_its_duration_and_on_a_latch_not_set_each_with_its_code() {
    let server = RedisServer::start();
    let url = server.url();
    ok(lease(&url).args(["latch", "report", "--count", "1"]));
    let began = Instant::now();
    let timed_out = output(lease(&url).args(["latch", "report", "--wait", "300ms"]));
    let took = began.elapsed();
    assert_eq!(timed_out.status.code(), Some(NOT_NOW), "{timed_out:?}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let said = stderr_of(&timed_out);
    assert!(
        said.contains("did not reach zero within --wait 0.3s, 1 left"),
        "{said}"
    );
    let never = output(lease(&url).args(["latch", "never-set", "--wait", "30s"]));
    assert_eq!(never.status.code(), Some(NO_LATCH), "{never:?}");
    assert!(
        stderr_of(&never).contains("\"never-set\" is not set (never set, or lapsed)"),
        "{}",
        stderr_of(&never)
    );
}

#[test]
fn ctrl_c_stops_a_wait_promptly() {
    let server = RedisServer::start();
    let url = server.url();
    ok(lease(&url).args(["latch", "deploy", "--count", "1"]));
    let waiter = start(lease(&url).args(["latch", "deploy", "--wait"]));
    listening(&server, "deploy");
    let pid = Pid::from_raw(i32::try_from(waiter.id()).expect("a pid"));
    let sent = Instant::now();
    kill(pid, Signal::SIGINT).expect("signal the waiter");
    let done = finish(waiter, Duration::from_secs(10));
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(done.status.code(), Some(128 + 2), "{done:?}");
    assert!(
        stderr_of(&done).contains("stopped waiting for \"deploy\""),
        "{}",
        stderr_of(&done)
    );
    // The latch is as it was.
    let shown = ok(lease(&url).args(["status", "deploy"]));
    assert!(shown.contains("latch, count 1"), "{shown}");
}

#[test]
fn status_shows_a_latch_in_words_and_in_json() {
    let server = RedisServer::start();
    let url = server.url();
    ok(lease(&url).args(["latch", "nightly/loaded", "--count", "2", "--expire", "1h"]));
    let counting = output(lease(&url).args(["status", "nightly/loaded"]));
    assert_eq!(counting.status.code(), Some(0), "{counting:?}");
    let text = stdout_of(&counting);
    assert!(
        text.starts_with("\"nightly/loaded\": latch, count 2, lapses in ")
            && (text.contains("59m") || text.ends_with("1h\n")),
        "{text}"
    );
    let json = output(lease(&url).args(["status", "--json", "nightly/loaded"]));
    assert_eq!(json.status.code(), Some(0), "{json:?}");
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(json["kind"], "latch", "{json}");
    assert_eq!(json["exists"], true, "{json}");
    assert_eq!(json["count"], 2, "{json}");
    let ttl = json["ttl_ms"].as_u64().expect("a TTL");
    assert!((3_500_000..=3_600_000).contains(&ttl), "{json}");
    ok(lease(&url).args(["latch", "nightly/loaded", "--down"]));
    ok(lease(&url).args(["latch", "nightly/loaded", "--down"]));
    let open = output(lease(&url).args(["status", "nightly/loaded"]));
    assert_eq!(open.status.code(), Some(1), "{open:?}");
    assert!(
        stdout_of(&open).contains("latch, at zero (open)"),
        "{open:?}"
    );
    // A name that is nothing is a free lock's, as before.
    let nothing = output(lease(&url).args(["status", "nothing"]));
    assert_eq!(nothing.status.code(), Some(1), "{nothing:?}");
    assert!(stdout_of(&nothing).contains("is free"), "{nothing:?}");
}

#[test]
fn bad_counts_and_flags_are_usage_errors() {
    // No server: the command line is refused before any connection.
    let url = format!("redis://127.0.0.1:{}", tool::closed_port());
    let cases: [&[&str]; 8] = [
        &["latch", "x", "--count", "0"],
        &["latch", "x", "--count", "-1"],
        &["latch", "x", "--count=-1"],
        &["latch", "x", "--count", "99999999999"],
        &["latch", "x", "--count", "three"],
        &["latch", "x"],
        &["latch", "x", "--down", "--wait"],
        &["latch", "x", "--down", "--expire", "1h"],
    ];
    for args in cases {
        let refused = output(lease(&url).args(args));
        let said = stderr_of(&refused);
        assert_eq!(refused.status.code(), Some(USAGE), "{args:?}: {said}");
        assert!(!said.contains("panicked"), "{args:?}: {said}");
    }
    let zero = stderr_of(&output(lease(&url).args(["latch", "x", "--count", "0"])));
    assert!(zero.contains("a latch at zero is open already"), "{zero}");
}

/// Count, count down, wait and status of a latch, on the store `lease` reaches.
fn count_down_wait_and_status(lease: &dyn Fn() -> Command) {
    ok(lease().args(["latch", "loaded", "--count", "2"]));
    let shown = ok(lease().args(["status", "loaded"]));
    assert!(shown.contains("\"loaded\": latch, count 2"), "{shown}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(lease().args(["status", "--json", "loaded"]))).expect("JSON");
    assert_eq!(
        (json["kind"].clone(), json["count"].clone()),
        ("latch".into(), 2.into())
    );
    let refused = output(lease().args(["latch", "loaded", "--count", "2"]));
    assert_eq!(refused.status.code(), Some(STILL_COUNTING), "{refused:?}");
    let waiter = start(lease().args(["latch", "loaded", "--wait", "30s"]));
    assert_eq!(ok(lease().args(["latch", "loaded", "--down"])).trim(), "1");
    let timed_out = output(lease().args(["latch", "loaded", "--wait", "200ms"]));
    assert_eq!(timed_out.status.code(), Some(NOT_NOW), "{timed_out:?}");
    assert_eq!(ok(lease().args(["latch", "loaded", "--down"])).trim(), "0");
    let done = finish(waiter, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    let never = output(lease().args(["latch", "never-set", "--wait", "5s"]));
    assert_eq!(never.status.code(), Some(NO_LATCH), "{never:?}");
}

#[test]
fn a_latch_on_postgres() {
    let server = pg::server();
    let url = server.scram_url();
    count_down_wait_and_status(&|| pg::lease(&url));
}

#[test]
fn a_latch_on_zookeeper_with_ttl_nodes() {
    let zk = ZooKeeper::start_with_properties(
        &["forceSync=no", "extendedTypesEnabled=true"],
        &["znode.container.checkIntervalMs=100"],
    );
    let hosts = zk.connect_string();
    count_down_wait_and_status(&|| {
        let mut command = bare();
        command.env("LEASE_ZOOKEEPER", &hosts);
        command
    });
}

#[test]
fn zookeeper_without_ttl_nodes_refuses_a_latch_clearly() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let refused = output(
        bare()
            .env("LEASE_ZOOKEEPER", zk.connect_string())
            .args(["latch", "batch", "--count", "2"]),
    );
    assert_eq!(refused.status.code(), Some(REFUSED), "{refused:?}");
    let said = stderr_of(&refused);
    assert!(said.contains("extendedTypesEnabled"), "{said}");
    assert!(!said.contains("panicked"), "{said}");
}
