//! What `lease run` says when it does not run or stops its command: a conflict worded for its
//! mode and naming the holder as `lease status` does, nothing under `-q` for a skipped run (as
//! `flock -n`), a `--max-hold` stop blamed on `--max-hold`, and durations as people write them.

mod support;
mod tool;

use support::{client, RedisServer};
use tool::{closed_port, lease, output, stderr_of, stdout_of};

const NOT_ACQUIRED: i32 = 75;
const LOST: i32 = 79;
const UNAVAILABLE: i32 = 69;

/// Whether `text` shows a duration as `Debug` does: a number with more than two decimals
/// followed by a unit (`999.875004ms`, `1.000000002s`).
fn shows_debug_duration(text: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .any(|word| {
            let unit = word.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
            let number = &word[..word.len() - unit.len()];
            let decimals = number.split_once('.').map_or(0, |(_, after)| after.len());
            decimals > 2 && ["s", "ms", "µs", "ns"].contains(&unit)
        })
}

#[test]
fn the_debug_duration_check_tells_debug_from_people() {
    assert!(shows_debug_duration(
        "its lease ends in 999.875004ms: stopping"
    ));
    assert!(!shows_debug_duration(
        "its lease ends in 1s, 0.33s, 29.3s, 1m30s"
    ));
}

#[test]
fn a_conflict_is_worded_for_its_mode_and_names_the_holder_as_status_does() {
    let server = RedisServer::start();
    let holder = client(&server);
    let _job = holder
        .lock("job")
        .and_then(|lock| lock.owned_by("host-a").lock())
        .expect("the lock");
    let status = stdout_of(&output(lease(&server.url()).args(["status", "job"])));
    assert!(status.contains("held by host-a (1 hold), "), "{status}");

    let once = output(lease(&server.url()).args(["run", "-n", "job", "--", "true"]));
    let said = stderr_of(&once);
    assert_eq!(once.status.code(), Some(NOT_ACQUIRED), "{said}");
    assert!(
        said.starts_with("lease: \"job\" is held elsewhere, by host-a (1 hold), ")
            && said.trim_end().ends_with(": not run"),
        "{said}"
    );
    assert!(!said.contains("--wait"), "-n is not a wait: {said}");

    let waited = output(lease(&server.url()).args(["run", "--wait", "0.3", "job", "--", "true"]));
    let said = stderr_of(&waited);
    assert_eq!(waited.status.code(), Some(NOT_ACQUIRED), "{said}");
    assert!(
        said.contains(
            "\"job\" was not acquired within --wait 0.3s, held elsewhere by host-a (1 hold)"
        ),
        "{said}"
    );

    let _leading = holder
        .election("sched")
        .and_then(|election| election.campaign("host-a"))
        .expect("the leadership");
    let once = output(
        lease(&server.url()).args(["run", "-n", "--value", "host-b", "sched", "--", "true"]),
    );
    let said = stderr_of(&once);
    assert_eq!(once.status.code(), Some(NOT_ACQUIRED), "{said}");
    assert!(
        said.contains("\"sched\": another candidate leads (term 1, \"host-a\"): not run"),
        "{said}"
    );
    assert!(!said.contains("--wait"), "{said}");
    let waited = output(lease(&server.url()).args([
        "run", "--wait", "0.3", "--value", "host-b", "sched", "--", "true",
    ]));
    let said = stderr_of(&waited);
    assert!(
        said.contains("\"sched\" was not led within --wait 0.3s: another candidate leads"),
        "{said}"
    );
}

#[test]
fn q_says_nothing_of_a_skipped_run_as_flock_n_and_still_says_why_anything_else_failed() {
    let server = RedisServer::start();
    let holder = client(&server);
    let _job = holder
        .lock("job")
        .and_then(|lock| lock.lock())
        .expect("the lock");
    let _leading = holder
        .election("sched")
        .and_then(|election| election.campaign("host-a"))
        .expect("the leadership");
    for (args, code) in [
        (&["-q", "run", "-n", "job"][..], NOT_ACQUIRED),
        (&["run", "-q", "--wait", "0.2", "job"], NOT_ACQUIRED),
        (&["-q", "run", "-n", "-E", "0", "job"], 0),
        (&["-q", "run", "-n", "--value", "v", "sched"], NOT_ACQUIRED),
    ] {
        let done = output(lease(&server.url()).args(args).args(["--", "true"]));
        assert_eq!(done.status.code(), Some(code), "{args:?}");
        assert_eq!(stderr_of(&done), "", "{args:?} said something");
    }
    let unreachable = format!("redis://127.0.0.1:{}", closed_port());
    let failed = output(lease(&unreachable).args(["-q", "run", "-n", "job", "--", "true"]));
    assert_eq!(failed.status.code(), Some(UNAVAILABLE));
    assert!(
        stderr_of(&failed).contains("unavailable"),
        "{}",
        stderr_of(&failed)
    );
    let help = stdout_of(&output(lease(&server.url()).arg("--help")));
    let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(
            "-q only the failure that explains the exit code, and nothing for a run \
             skipped because NAME is held elsewhere (as flock -n)"
        ),
        "{help}"
    );
}

#[test]
fn a_max_hold_stop_names_max_hold_with_durations_as_people_write_them() {
    let server = RedisServer::start();
    let done = output(lease(&server.url()).args([
        "--lease",
        "3s",
        "run",
        "--max-hold",
        "1s",
        "mh",
        "--",
        "sleep",
        "10",
    ]));
    let said = stderr_of(&done);
    assert_eq!(done.status.code(), Some(LOST), "{said}");
    assert!(
        said.contains("\"mh\" was held for --max-hold 1s, so its lease is no longer renewed"),
        "{said}"
    );
    assert!(!said.contains("no renewal"), "{said}");
    assert!(!shows_debug_duration(&said), "{said}");
}

#[test]
fn v_shows_a_token_as_a_number() {
    let server = RedisServer::start();
    let done = output(lease(&server.url()).args(["-v", "run", "job", "--", "true"]));
    let said = stderr_of(&done);
    assert_eq!(done.status.code(), Some(0), "{said}");
    assert!(said.contains("acquired (token 1, holds 1)"), "{said}");
    assert!(!said.contains("Some("), "{said}");
    // Each record's own time (`lease: 0.011s debug target: ...`) is a stamp, not a message.
    let messages: Vec<&str> = said
        .lines()
        .filter_map(|line| line.splitn(3, ": ").nth(2))
        .collect();
    assert!(!shows_debug_duration(&messages.join("\n")), "{said}");
}
