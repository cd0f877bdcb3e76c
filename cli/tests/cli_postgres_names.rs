//! On a real PostgreSQL, a name is one primitive's as on Redis: `lease status`, `lease run` and
//! `lease unlock --force` say whose it is (a semaphore's with its permits, a read-write lock's,
//! an election's with its leader) and which flag takes it; `lease leader` shows an election's
//! term and value, and `lease resize` a semaphore's stored permits.

mod pg;
mod tool;

use pg::{lease, server};
use redis_lease::Client;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;
use tool::{output, scratch, shell, stderr_of, stdout_of};

const DATA: i32 = 65;
const FREE: i32 = 1;

fn client(url: &str) -> Client {
    Client::postgres(url)
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings")
}

#[test]
fn each_command_reads_a_name_as_the_primitive_it_is() {
    let server = server();
    let url = server.scram_url();
    let holder = client(&url);
    let _permit = holder
        .semaphore("sem", 3)
        .and_then(|semaphore| semaphore.owned_by("web-1").acquire())
        .expect("a permit");
    let _writer = holder
        .read_write_lock("rw")
        .and_then(|rw| rw.write_lock().lock())
        .expect("the write hold");
    let _fair = holder
        .fair_lock("fl")
        .and_then(|lock| lock.lock())
        .expect("the fair lock");
    let _leading = holder
        .election("el")
        .and_then(|election| election.campaign("host-a"))
        .expect("the leadership");
    let shown: [(&str, &str); 4] = [
        ("sem", "(semaphore) held by web-1 (1 hold)"),
        ("rw", "(write lock) held by"),
        ("fl", "held by"),
        ("el", "(election) held by"),
    ];
    for (name, said) in shown {
        let status = output(lease(&url).args(["status", name]));
        let text = stdout_of(&status);
        assert_eq!(status.status.code(), Some(0), "{name}: {text}");
        assert!(text.contains(said), "{name}: no {said:?} in {text}");
    }
    let sem = stdout_of(&output(lease(&url).args(["status", "sem"])));
    assert!(sem.contains("1 of 3 permits held, 2 free"), "{sem}");
    let el = stdout_of(&output(lease(&url).args(["status", "el"])));
    assert!(el.contains("value \"host-a\""), "{el}");

    let (_dir, marker) = scratch("ran");
    let mismatches: [(&[&str], &str); 6] = [
        (
            &["sem"],
            "a semaphore of 3 permits, not a lock: VERB it with --permits 3",
        ),
        (
            &["--read", "sem"],
            "a semaphore of 3 permits, not a read-write lock",
        ),
        (
            &["rw"],
            "a read-write lock, not a lock: VERB it with --read or --write",
        ),
        (
            &["--permits", "2", "rw"],
            "a read-write lock, not a semaphore",
        ),
        (
            &["--permits", "2", "fl"],
            "a lock, not a semaphore: VERB it without --permits",
        ),
        (&["--write", "fl"], "a lock, not a read-write lock"),
    ];
    for (args, said) in mismatches {
        // Without a flag, `status` shows the name as what it is (above).
        if args.len() > 1 {
            let looked = output(lease(&url).arg("status").args(args));
            let text = stdout_of(&looked);
            assert_eq!(looked.status.code(), Some(DATA), "status {args:?}: {text}");
            assert!(
                text.contains(&said.replace("VERB", "look at")),
                "status {args:?}: {text}"
            );
        }
        let ran = output(
            lease(&url)
                .args(["run", "-n"])
                .args(args)
                .args(shell("touch FILE", &marker)),
        );
        let stderr = stderr_of(&ran);
        assert_eq!(ran.status.code(), Some(DATA), "run {args:?}: {stderr}");
        assert!(
            stderr.contains(&said.replace("VERB", "take")),
            "run {args:?}: {stderr}"
        );
        assert!(!marker.exists(), "run {args:?} ran its command");
        let removed = output(lease(&url).args(["unlock", "--force"]).args(args));
        let stderr = stderr_of(&removed);
        assert_eq!(
            removed.status.code(),
            Some(DATA),
            "unlock {args:?}: {stderr}"
        );
        assert!(
            stderr.contains("nothing removed: ")
                && stderr.contains(&said.replace("VERB", "remove")),
            "unlock {args:?}: {stderr}"
        );
    }
    for (args, said) in [
        (
            &["el"][..],
            "\"el\" is an election (term 1, \"host-a\" leads), not a lock",
        ),
        (
            &["--value", "v", "sem"],
            "a semaphore of 3 permits that is held now, not an election",
        ),
    ] {
        let ran = output(
            lease(&url)
                .args(["run", "-n"])
                .args(args)
                .args(shell("touch FILE", &marker)),
        );
        let stderr = stderr_of(&ran);
        assert_eq!(ran.status.code(), Some(DATA), "run {args:?}: {stderr}");
        assert!(stderr.contains(said), "run {args:?}: {stderr}");
    }
    let kept = output(lease(&url).args(["unlock", "--force", "el"]));
    assert_eq!(kept.status.code(), Some(DATA), "{}", stderr_of(&kept));
    assert!(stderr_of(&kept).contains("unlock removes no leader"));
    let still = stdout_of(&output(lease(&url).args([
        "status",
        "--permits",
        "3",
        "sem",
    ])));
    assert!(
        still.contains("1 of 3 permits held"),
        "nothing was removed: {still}"
    );
    let removed = output(lease(&url).args(["unlock", "--force", "--permits", "3", "sem"]));
    let text = stdout_of(&removed);
    assert_eq!(removed.status.code(), Some(0), "{}", stderr_of(&removed));
    assert!(
        text.starts_with("removed the semaphore \"sem\"") && text.contains("web-1 (1 hold)"),
        "{text}"
    );
}

#[test]
fn leader_shows_the_term_and_value_and_resize_the_stored_permits() {
    let server = server();
    let url = server.scram_url();
    let nobody = output(lease(&url).args(["leader", "scheduler"]));
    assert_eq!(nobody.status.code(), Some(FREE), "{}", stderr_of(&nobody));
    assert_eq!(stdout_of(&nobody).trim(), "\"scheduler\": no leader");
    let mut follower = lease(&url)
        .args(["leader", "scheduler", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the lease binary");
    let (sent, followed) = mpsc::channel();
    let stdout = follower.stdout.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = sent.send(line);
        }
    });
    let next = || followed.recv_timeout(Duration::from_secs(10)).ok();
    assert_eq!(next().as_deref(), Some("\"scheduler\": no leader"));
    let (_dir, marker) = scratch("leading");
    let led = output(
        lease(&url)
            .args([
                "--lease",
                "2s",
                "run",
                "--value",
                "host-a:8080",
                "scheduler",
            ])
            .args(shell("touch FILE; sleep 2", &marker)),
    );
    assert_eq!(led.status.code(), Some(0), "{}", stderr_of(&led));
    // Woken by the store's notifications: the leader, then no leader once it resigned.
    let seen = [next(), next()];
    let _ = follower.kill();
    let _ = follower.wait();
    assert_eq!(
        seen,
        [
            Some("\"scheduler\": term 1, \"host-a:8080\"".to_owned()),
            Some("\"scheduler\": no leader".to_owned())
        ]
    );

    // A semaphore that no one holds is shown by the permits it stores (a lock's view of its
    // name finds nothing wrong on PostgreSQL); a name never used is a free lock's.
    let stored = output(lease(&url).args(["resize", "--permits", "4", "spare"]));
    assert_eq!(
        stdout_of(&stored).trim(),
        "\"spare\": 4 permits (none stored before)"
    );
    let spare = output(lease(&url).args(["status", "spare"]));
    let text = stdout_of(&spare);
    assert_eq!(spare.status.code(), Some(FREE), "{text}");
    assert!(
        text.contains("(semaphore) is free") && text.contains("0 of 4 permits held, 4 free"),
        "{text}"
    );
    let never = stdout_of(&output(lease(&url).args(["status", "never"])));
    assert!(
        never.contains("is free") && !never.contains("semaphore"),
        "{never}"
    );

    let holder = client(&url);
    let _permit = holder
        .semaphore("exports", 3)
        .and_then(|semaphore| semaphore.acquire())
        .expect("a permit");
    let resized = output(lease(&url).args(["resize", "--permits", "5", "exports"]));
    assert_eq!(resized.status.code(), Some(0), "{}", stderr_of(&resized));
    assert_eq!(stdout_of(&resized).trim(), "\"exports\": 5 permits (was 3)");
    let status = stdout_of(&output(lease(&url).args(["status", "exports"])));
    assert!(status.contains("1 of 5 permits held, 4 free"), "{status}");
    let refused = output(
        lease(&url)
            .args(["run", "-n", "--permits", "3", "exports"])
            .args(shell("touch FILE", &marker)),
    );
    assert_eq!(refused.status.code(), Some(64), "{}", stderr_of(&refused));
    assert!(
        stderr_of(&refused).contains("declared 5 permits, and this acquisition 3"),
        "{}",
        stderr_of(&refused)
    );
}
