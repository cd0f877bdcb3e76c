//! The `lease` tool on a real ZooKeeper: runs on one name never overlap and their tokens rise,
//! `status` names the holding session and the waiters, `unlock --force` clears a hold, and
//! `--zookeeper` refuses Redis options beside it.

mod tool;

use std::process::Child;
use std::time::Duration;
use testkit::ZooKeeper;
use tool::{bare, finish, one_run_at_a_time, output, scratch, shell, spawn, stderr_of, stdout_of};

const USAGE: i32 = 64;

fn lease(zk: &ZooKeeper) -> std::process::Command {
    let mut command = bare();
    command.env("LEASE_ZOOKEEPER", zk.connect_string());
    command
}

#[test]
fn runs_on_one_name_never_overlap_and_their_tokens_rise() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let (_dir, stamps) = scratch("stamps");
    let script = "echo start $LEASE_TOKEN >> FILE; sleep 0.2; echo end $LEASE_TOKEN >> FILE";
    let runs: Vec<Child> = (0..3)
        .map(|_| {
            spawn(
                lease(&zk)
                    .args(["--lease", "2s", "run", "--wait", "30s", "nightly"])
                    .args(shell(script, &stamps)),
            )
        })
        .collect();
    for run in runs {
        let done = finish(run, Duration::from_secs(30));
        assert_eq!(done.status.code(), Some(0), "{done:?}");
    }
    one_run_at_a_time(&stamps, 3);
}

#[test]
fn status_names_the_holding_session_and_unlock_force_clears_it() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let holder = spawn(
        lease(&zk)
            .args(["--lease", "2s", "run", "report", "--"])
            .args(["sleep", "30"]),
    );
    let mut shown = String::new();
    for _ in 0..200 {
        let status = output(lease(&zk).args(["status", "report"]));
        shown = stdout_of(&status);
        if shown.contains("held by") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(shown.contains("while session 0x"), "{shown}");
    assert!(shown.contains("0 waiting"), "{shown}");
    let json = stdout_of(&output(lease(&zk).args(["status", "--json", "report"])));
    assert!(json.contains("\"holder_session\""), "{json}");
    let forced = output(lease(&zk).args(["unlock", "--force", "report"]));
    assert_eq!(forced.status.code(), Some(0), "{}", stderr_of(&forced));
    // The holder learns its hold is gone and stops its command.
    let done = finish(holder, Duration::from_secs(20));
    assert_ne!(done.status.code(), Some(0), "{done:?}");
    // Free again, and a lock's: a semaphore's view of it gives back the permits asked for,
    // which no semaphore stored.
    let ran = output(lease(&zk).args(["run", "report", "--", "true"]));
    assert_eq!(ran.status.code(), Some(0), "{}", stderr_of(&ran));
    let free = output(lease(&zk).args(["status", "report"]));
    let text = stdout_of(&free);
    assert_eq!(free.status.code(), Some(1), "{text}{}", stderr_of(&free));
    assert!(
        text.contains("is free") && !text.contains("semaphore"),
        "{text}"
    );
}

#[test]
fn zookeeper_excludes_the_redis_options() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let refused = output(lease(&zk).args(["--url", "redis://127.0.0.1:6379", "status", "x"]));
    assert_eq!(refused.status.code(), Some(USAGE), "{refused:?}");
    assert!(stderr_of(&refused).contains("--zookeeper excludes"));
}
