//! What `lease run` says when it stops its command: a `--max-hold` stop blamed on `--max-hold`,
//! and durations as people write them.

mod tool;

use testkit::RedisServer;
use tool::{lease, output, stderr_of};

const LOST: i32 = 79;

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
