//! A name is one primitive's: `lease status`, `lease run` and `lease unlock --force` say whose
//! (a lock's, a semaphore's, a read-write lock's, an election's) and the flag that takes it,
//! rather than "free" or "a key of another type", on a real server.

mod support;
mod tool;

use std::time::Duration;
use support::{client, RedisServer};
use tool::{finish, lease, output, scratch, shell, spawn, stderr_of, stdout_of};

const DATA: i32 = 65;
const FREE: i32 = 1;

#[test]
fn status_shows_a_led_election_with_its_leader_term_and_value() {
    let server = RedisServer::start();
    let (_dir, marker) = scratch("leading");
    let leader = spawn(
        lease(&server.url())
            .args(["--lease", "2s", "run", "--value", "host-a", "sched"])
            .args(shell("touch FILE; sleep 3", &marker)),
    );
    testkit::wait_until("the run leads", Duration::from_secs(10), || marker.exists());
    let shown = output(lease(&server.url()).args(["status", "sched"]));
    let text = stdout_of(&shown);
    assert_eq!(shown.status.code(), Some(0), "{text}{}", stderr_of(&shown));
    assert!(
        text.contains("(election) held by")
            && text.contains("token 1,")
            && text.contains("value \"host-a\""),
        "{text}"
    );
    assert!(!text.contains("free"), "{text}");
    let json = output(lease(&server.url()).args(["status", "sched", "--json"]));
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&json)).expect("json");
    assert_eq!(
        (
            &json["kind"],
            &json["held"],
            &json["hold_token"],
            &json["value"]
        ),
        (
            &serde_json::json!("election"),
            &serde_json::json!(true),
            &serde_json::json!(1),
            &serde_json::json!("host-a")
        ),
        "{json}"
    );
    let done = finish(leader, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    let after = output(lease(&server.url()).args(["status", "sched"]));
    assert_eq!(after.status.code(), Some(FREE), "{}", stdout_of(&after));
}

#[test]
fn status_reads_a_name_as_what_it_is_and_never_calls_another_primitives_name_free() {
    let server = RedisServer::start();
    let holder = client(&server);
    let _writer = holder
        .read_write_lock("rw")
        .and_then(|rw| rw.write_lock().lock())
        .expect("the write hold");
    let _job = holder
        .lock("job")
        .and_then(|lock| lock.owned_by("host-a").lock())
        .expect("the lock");
    let plain = output(lease(&server.url()).args(["status", "rw"]));
    let text = stdout_of(&plain);
    assert_eq!(plain.status.code(), Some(0), "{text}");
    assert!(text.contains("(write lock) held by"), "{text}");
    for (args, said) in [
        (
            &["--permits", "2", "rw"][..],
            "\"rw\" is a read-write lock, not a semaphore: look at it with --read or --write",
        ),
        (
            &["--read", "job"],
            "\"job\" is a lock, not a read-write lock: look at it without --permits",
        ),
    ] {
        let shown = output(lease(&server.url()).arg("status").args(args));
        let text = stdout_of(&shown);
        assert_eq!(shown.status.code(), Some(DATA), "{args:?}: {text}");
        assert!(text.starts_with(said), "{args:?}: {text}");
        assert!(!text.contains("free"), "{args:?}: {text}");
    }
}

#[test]
fn a_run_on_another_primitives_name_says_what_it_is_and_which_flag_takes_it() {
    let server = RedisServer::start();
    let holder = client(&server);
    let _permit = holder
        .semaphore("sem", 3)
        .and_then(|semaphore| semaphore.acquire())
        .expect("a permit");
    let _reader = holder
        .read_write_lock("rw")
        .and_then(|rw| rw.read_lock().lock())
        .expect("a read hold");
    let _fair = holder
        .fair_lock("fl")
        .and_then(|lock| lock.lock())
        .expect("the fair lock");
    let _leading = holder
        .election("el")
        .and_then(|election| election.campaign("host-a"))
        .expect("the leadership");
    let (_dir, marker) = scratch("ran");
    let cases: [(&[&str], &[&str]); 13] = [
        (
            &["sem"],
            &["a semaphore of 3 permits, not a lock", "with --permits 3"],
        ),
        (
            &["--read", "sem"],
            &[
                "a semaphore of 3 permits, not a read-write lock",
                "--permits 3",
            ],
        ),
        (
            &["--fair", "sem"],
            &["a semaphore of 3 permits", "--permits 3"],
        ),
        (
            &["rw"],
            &["a read-write lock, not a lock", "with --read or --write"],
        ),
        (
            &["--permits", "2", "rw"],
            &["a read-write lock, not a semaphore", "--read or --write"],
        ),
        (
            &["--fair", "rw"],
            &["a read-write lock", "--read or --write"],
        ),
        (
            &["--permits", "2", "fl"],
            &["a lock, not a semaphore", "without --permits"],
        ),
        (
            &["--write", "fl"],
            &["a lock, not a read-write lock", "without"],
        ),
        (&["el"], &["an election", "\"host-a\"", "with --value"]),
        (&["--permits", "2", "el"], &["an election", "--value"]),
        (&["--value", "v", "fl"], &["a lock", "without --value"]),
        (
            &["--value", "v", "sem"],
            &["a semaphore of 3 permits", "--permits 3"],
        ),
        (
            &["--value", "v", "rw"],
            &["a read-write lock", "--read or --write"],
        ),
    ];
    for (args, said) in cases {
        let done = output(
            lease(&server.url())
                .args(["run", "-n"])
                .args(args)
                .args(shell("touch FILE", &marker)),
        );
        let stderr = stderr_of(&done);
        assert_eq!(done.status.code(), Some(DATA), "{args:?}: {stderr}");
        for words in said {
            assert!(stderr.contains(words), "{args:?}: no {words:?} in {stderr}");
        }
        assert!(!marker.exists(), "{args:?} ran its command");
    }
}

#[test]
fn unlock_force_says_what_it_removed_and_removes_nothing_of_another_primitive() {
    let server = RedisServer::start();
    let holder = client(&server);
    let semaphore = holder.semaphore("sem", 3).expect("a semaphore");
    let _permits = ["web-1", "web-2"].map(|owner| {
        semaphore
            .owned_by(owner)
            .acquire()
            .expect("a permit for each")
    });
    let refused = output(lease(&server.url()).args(["unlock", "--force", "sem"]));
    let said = stderr_of(&refused);
    assert_eq!(refused.status.code(), Some(DATA), "{said}");
    assert_eq!(stdout_of(&refused), "", "nothing is said removed");
    assert!(
        said.contains("nothing removed")
            && said.contains("a semaphore of 3 permits, not a lock")
            && said.contains("remove it with --permits 3"),
        "{said}"
    );
    let still = output(lease(&server.url()).args(["status", "--permits", "3", "sem"]));
    assert!(
        stdout_of(&still).contains("2 of 3 permits held"),
        "{}",
        stdout_of(&still)
    );

    let removed = output(lease(&server.url()).args(["unlock", "--force", "--permits", "3", "sem"]));
    let text = stdout_of(&removed);
    assert_eq!(removed.status.code(), Some(0), "{}", stderr_of(&removed));
    assert!(
        text.starts_with("removed the semaphore \"sem\"")
            && text.contains("web-1 (1 hold)")
            && text.contains("web-2 (1 hold)"),
        "{text}"
    );
    assert!(
        !text.contains("free") && !text.contains("problem"),
        "{text}"
    );
    let gone = output(lease(&server.url()).args(["status", "--permits", "3", "sem"]));
    assert_eq!(gone.status.code(), Some(FREE), "{}", stdout_of(&gone));

    let _job = holder
        .lock("job")
        .and_then(|lock| lock.owned_by("host-a").lock())
        .expect("the lock");
    let refused = output(lease(&server.url()).args(["unlock", "--force", "--permits", "2", "job"]));
    let said = stderr_of(&refused);
    assert_eq!(refused.status.code(), Some(DATA), "{said}");
    assert!(
        said.contains("nothing removed") && said.contains("a lock, not a semaphore"),
        "{said}"
    );
    let removed = output(lease(&server.url()).args(["unlock", "--force", "job"]));
    let text = stdout_of(&removed);
    assert_eq!(removed.status.code(), Some(0), "{}", stderr_of(&removed));
    assert!(
        text.starts_with("removed the lock \"job\"") && text.contains("held by host-a (1 hold)"),
        "{text}"
    );
    let again = output(lease(&server.url()).args(["unlock", "--force", "job"]));
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(
        stdout_of(&again).trim(),
        "\"job\" was not held: nothing removed"
    );

    let _leading = holder
        .election("sched")
        .and_then(|election| election.campaign("host-a"))
        .expect("the leadership");
    let refused = output(lease(&server.url()).args(["unlock", "--force", "sched"]));
    let said = stderr_of(&refused);
    assert_eq!(refused.status.code(), Some(DATA), "{said}");
    assert!(
        said.contains("nothing removed") && said.contains("an election"),
        "{said}"
    );
}
