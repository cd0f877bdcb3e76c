//! The `lease` command-line tool against a real redis-server: runs never overlap, waiting, a lost
//! lease stopping the command, signals, exit statuses, status and force unlock, bad input.

mod support;
mod tool;

use redis_lease::redis;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{client, wait_until, RedisServer};
use testkit::{ClientAuth, TlsOptions};
use tool::{closed_port, finish, lease, output, scratch, shell, spawn, stderr_of, stdout_of};

const NOT_ACQUIRED: i32 = 75;
const LOST: i32 = 79;
const UNAVAILABLE: i32 = 69;
const USAGE: i32 = 64;
const NOT_FOUND: i32 = 127;
const REFUSED: i32 = 78;
const DATA: i32 = 65;

#[test]
fn runs_on_one_name_never_overlap_and_their_tokens_rise() {
    let server = RedisServer::start();
    let (_dir, stamps) = scratch("stamps");
    let script = "echo start $LEASE_TOKEN $(date +%s%N) >> FILE; sleep 0.2; \
                  echo end $LEASE_TOKEN $(date +%s%N) >> FILE";
    let runs: Vec<Child> = (0..4)
        .map(|_| {
            spawn(
                lease(&server.url())
                    .args(["--lease", "1s", "run", "--wait", "30s", "nightly"])
                    .args(shell(script, &stamps)),
            )
        })
        .collect();
    for run in runs {
        let done = finish(run, Duration::from_secs(30));
        assert_eq!(done.status.code(), Some(0), "{done:?}");
    }
    let log = fs::read_to_string(&stamps).expect("the jobs wrote stamps");
    let lines: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 8, "{log}");
    let mut last_token = 0;
    for pair in lines.chunks(2) {
        let (start, end) = (&pair[0], &pair[1]);
        assert_eq!(
            (start[0], end[0]),
            ("start", "end"),
            "interleaved runs:\n{log}"
        );
        assert_eq!(start[1], end[1], "one run per start/end pair:\n{log}");
        let token: u64 = start[1].parse().expect("a token");
        assert!(token > last_token, "tokens rise:\n{log}");
        last_token = token;
    }
}

#[test]
fn wait_zero_fails_at_once_on_a_held_lock_without_running_the_command() {
    let server = RedisServer::start();
    let holder = client(&server);
    let _held = holder
        .lock("busy")
        .expect("valid name")
        .with_lease(Duration::from_secs(30))
        .lock()
        .expect("free");
    let (_dir, marker) = scratch("ran");
    let started = Instant::now();
    let done = output(
        lease(&server.url())
            .args(["run", "--wait", "0", "busy"])
            .args(shell("touch FILE", &marker)),
    );
    assert_eq!(done.status.code(), Some(NOT_ACQUIRED));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!marker.exists(), "the command must not run");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(stderr.contains("is held elsewhere"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

#[test]
fn a_lost_lease_stops_the_command_and_exits_with_the_lost_code() {
    let server = RedisServer::start();
    let (_dir, pid_file) = scratch("pid");
    // The command ignores SIGTERM, so it takes the SIGKILL after the grace period.
    let run = spawn(
        lease(&server.url())
            .args([
                "--lease",
                "300ms",
                "run",
                "--kill-grace",
                "300ms",
                "fragile",
            ])
            .args(shell("trap '' TERM; echo $$ > FILE; sleep 30", &pid_file)),
    );
    wait_until("the command started", || {
        fs::read_to_string(&pid_file).is_ok_and(|pid| pid.ends_with('\n'))
    });
    let pid = fs::read_to_string(&pid_file)
        .expect("pid")
        .trim()
        .to_owned();
    server.pause();
    let done = finish(run, Duration::from_secs(10));
    server.resume();
    assert_eq!(done.status.code(), Some(LOST), "{done:?}");
    let stderr = String::from_utf8_lossy(&done.stderr);
    // Whichever comes first: the renewals missing until the lease is about to lapse, or the
    // watchdog's word that it is lost.
    assert!(
        stderr.contains("lost the lease") || stderr.contains("no renewal of \"fragile\" confirmed"),
        "{stderr}"
    );
    assert!(stderr.contains("SIGKILL"), "{stderr}");
    let alive = Command::new("kill")
        .args(["-0", &pid])
        .stderr(Stdio::null())
        .status()
        .expect("run kill");
    assert!(!alive.success(), "the command {pid} was stopped");
}

#[test]
fn signals_are_forwarded_and_the_command_status_passes_through() {
    let server = RedisServer::start();
    let (dir, ready) = scratch("ready");
    let got = dir.path().join("got");
    let script = format!(
        "trap 'echo term > {}; exit 3' TERM; echo > FILE; while :; do sleep 0.05; done",
        got.display()
    );
    let run = spawn(
        lease(&server.url())
            .args(["run", "sig"])
            .args(shell(&script, &ready)),
    );
    wait_until("the command started", || ready.exists());
    let sent = Command::new("kill")
        .args(["-TERM", &run.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let done = finish(run, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(3), "{done:?}");
    assert!(got.exists(), "the command got the SIGTERM");
    let lock = client(&server).lock("sig").expect("valid name");
    assert!(!lock.is_locked().expect("reachable"), "released");
}

#[test]
fn exit_codes_and_signals_of_the_command_pass_through_and_it_sees_its_lease() {
    let server = RedisServer::start();
    let url = server.url();
    let code = |script: &str| {
        output(lease(&url).args(["run", "codes", "--", "sh", "-c", script]))
            .status
            .code()
    };
    assert_eq!(code("exit 7"), Some(7));
    assert_eq!(code("kill -KILL $$"), Some(128 + 9));
    assert_eq!(
        code(
            "test \"$LEASE_HELD\" = 1 && test \"$LEASE_NAME\" = codes \
             && test -n \"$LEASE_OWNER\" && test \"$LEASE_TOKEN\" -ge 1"
        ),
        Some(0)
    );
}

#[test]
fn status_shows_the_holder_and_force_unlock_clears_it() {
    let server = RedisServer::start();
    let holder = client(&server);
    let guard = holder
        .lock("shown")
        .expect("valid name")
        .with_lease(Duration::from_secs(30))
        .lock()
        .expect("free");
    let url = server.url();

    let status = output(lease(&url).args(["status", "shown"]));
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("held by") && text.contains(guard.owner()),
        "{text}"
    );

    let json = output(lease(&url).args(["status", "shown", "--json"]));
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("valid JSON");
    assert_eq!(value["held"], true);
    assert_eq!(value["holders"][0]["owner"], guard.owner());
    assert_eq!(value["last_token"], guard.fencing_token().expect("a token"));
    assert!(value["ttl_ms"].as_u64().is_some_and(|ttl| ttl > 20_000));

    let refused = output(lease(&url).args(["unlock", "shown"]));
    assert_eq!(refused.status.code(), Some(USAGE));
    assert!(holder
        .lock("shown")
        .expect("valid")
        .is_locked()
        .expect("reachable"));

    let forced = output(lease(&url).args(["unlock", "--force", "shown"]));
    assert_eq!(forced.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&forced.stdout).contains("removed"));
    let status = output(lease(&url).args(["status", "shown"]));
    assert!(String::from_utf8_lossy(&status.stdout).contains("is free"));
    drop(guard);
}

#[test]
fn failures_past_the_command_line_get_one_line_and_their_documented_code() {
    let server = RedisServer::start();
    let unreachable = format!("redis://127.0.0.1:{}", closed_port());
    let url = server.url();
    let cases: Vec<(Vec<&str>, &str, i32)> = vec![
        (vec!["status", "x"], "not-a-url", USAGE),
        (vec!["status", "x"], &unreachable, UNAVAILABLE),
        (
            vec!["--lease", "400years", "run", "x", "--", "true"],
            &url,
            USAGE,
        ),
        (vec!["run", "", "--", "true"], &url, USAGE),
        (vec!["run", "--owner", ":x", "x", "--", "true"], &url, USAGE),
        (
            vec!["run", "x", "--", "/nonexistent/command"],
            &url,
            NOT_FOUND,
        ),
    ];
    for (args, url, expected) in cases {
        let done = output(lease(url).args(&args));
        let stderr = stderr_of(&done);
        assert_eq!(done.status.code(), Some(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("lease: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    let lock = client(&server).lock("x").expect("valid name");
    assert!(
        !lock.is_locked().expect("reachable"),
        "a command that could not start left no hold"
    );
}

#[test]
fn an_unreachable_server_is_named_without_its_password() {
    let port = closed_port();
    let done = output(
        lease(&format!("redis://:hunter2@127.0.0.1:{port}")).args(["run", "job", "--", "true"]),
    );
    assert_eq!(done.status.code(), Some(UNAVAILABLE), "{done:?}");
    let stderr = stderr_of(&done);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "lease: redis unavailable at redis://:***@127.0.0.1:{port}: \
             Connection refused (os error 111)"
        ),
    );
}

#[test]
fn a_script_without_a_shebang_is_run_by_the_shell_by_path_or_by_name() {
    let server = RedisServer::start();
    let (dir, out) = scratch("out");
    let script = dir.path().join("no-shebang");
    fs::write(
        &script,
        format!("echo \"ran $1 $LEASE_HELD\" >> {}\n", out.display()),
    )
    .expect("write the script");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("chmod");
    let by_path = output(
        lease(&server.url())
            .arg("run")
            .arg("job")
            .arg("--")
            .arg(&script)
            .arg("a"),
    );
    assert_eq!(by_path.status.code(), Some(0), "{by_path:?}");
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let by_name = output(lease(&server.url()).env("PATH", path).args([
        "run",
        "job",
        "--",
        "no-shebang",
        "b",
    ]));
    assert_eq!(by_name.status.code(), Some(0), "{by_name:?}");
    assert_eq!(
        fs::read_to_string(&out).expect("the script ran"),
        "ran a 1\nran b 1\n"
    );
}

#[test]
fn an_explicit_owner_names_the_holder_and_another_run_under_it_still_waits() {
    let server = RedisServer::start();
    let url = server.url();
    let tool = env!("CARGO_BIN_EXE_lease");
    let (_dir, seen) = scratch("status.json");
    // Inside the command: `status` shows the owner; a second run as the same owner does not
    // share the hold, so it is refused like any other (75).
    let script = format!(
        "test \"$LEASE_OWNER\" = deploy-42 || exit 10; \
         {tool} --url {url} status --json job > FILE || exit 11; \
         {tool} --url {url} run --owner deploy-42 --wait 0 job -- true; \
         test $? = {NOT_ACQUIRED} || exit 12"
    );
    let done = output(
        lease(&url)
            .args(["run", "--owner", "deploy-42", "job"])
            .args(shell(&script, &seen)),
    );
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    let status: serde_json::Value =
        serde_json::from_slice(&fs::read(&seen).expect("status ran")).expect("valid JSON");
    assert_eq!(status["holders"][0]["owner"], "deploy-42", "{status}");
    let lock = client(&server).lock("job").expect("valid name");
    assert!(!lock.is_locked().expect("reachable"), "released");
}

#[test]
fn a_run_through_sentinels_gets_a_token_of_the_primarys_epoch_and_refuses_unacknowledged_holds() {
    let set = testkit::SentinelSet::start();
    let sentinels = set.sentinel_urls().join(",");
    let (_dir, tokens) = scratch("tokens");
    let through = |extra: &[&str]| {
        let mut command = tool::bare();
        command
            .args(["--url", &sentinels, "--sentinel", set.master_name()])
            .args(["--command-timeout", "1s"])
            .args(extra)
            .args(["run", "--wait", "0", "job"])
            .args(shell("echo $LEASE_TOKEN >> FILE", &tokens));
        output(&mut command)
    };
    let done = through(&[]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    let done = through(&["--replica-acks", "1"]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    let written = fs::read_to_string(&tokens).expect("the jobs wrote their tokens");
    let written: Vec<u64> = written
        .lines()
        .map(|line| line.parse().expect("a token"))
        .collect();
    assert_eq!(written, [1, 2], "no failover yet: epoch 0");

    // Acknowledgements required and the replica gone: the command never runs.
    set.pause_replica();
    let refused = through(&["--replica-acks", "1"]);
    assert_eq!(refused.status.code(), Some(UNAVAILABLE), "{refused:?}");
    let stderr = stderr_of(&refused);
    assert!(stderr.contains("replicas acknowledged"), "{stderr}");
    set.resume_replica();
    let written = fs::read_to_string(&tokens).expect("readable");
    assert_eq!(written.lines().count(), 2, "the refused run did not run");
}

#[test]
fn tls_refusals_exit_with_the_refused_code_at_once() {
    let required = RedisServer::start_tls(TlsOptions {
        client_auth: ClientAuth::Required,
        ..TlsOptions::default()
    });
    let certificates = required.tls_certificates().expect("a TLS server").clone();
    let trusting = |command: &mut Command| {
        command.arg("--tls-ca-file").arg(certificates.ca_cert());
    };
    let plain = RedisServer::start();
    let not_tls = plain.url().replacen("redis://", "rediss://", 1);
    let cases: [(&str, &str, bool); 3] = [
        // The tool presents no client certificate.
        (&required.url(), "requires a client certificate", true),
        // It does not trust the server's CA.
        (&required.url(), "certificate", false),
        (&not_tls, "does not speak TLS", true),
    ];
    for (url, says, trust) in cases {
        for args in [
            &["status", "x"][..],
            &["run", "--wait", "5s", "x", "--", "true"],
        ] {
            let mut command = lease(url);
            if trust {
                trusting(&mut command);
            }
            let start = Instant::now();
            let done = output(command.args(args));
            let stderr = stderr_of(&done);
            assert_eq!(
                done.status.code(),
                Some(REFUSED),
                "{url} {args:?}: {stderr}"
            );
            assert!(stderr.contains(says), "{url} {args:?}: {stderr}");
            assert!(
                start.elapsed() < Duration::from_millis(1500),
                "{url} {args:?}"
            );
        }
    }
}

#[test]
fn a_redlock_run_with_too_few_masters_is_unavailable_not_held_elsewhere() {
    let masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = masters.iter().map(RedisServer::url).collect();
    let [down_a, down_b] =
        [closed_port(), closed_port()].map(|port| format!("redis://127.0.0.1:{port}"));
    let two_down = format!("{},{down_a},{down_b}", urls[0]);
    for wait in ["0", "1s"] {
        let done =
            output(lease(&two_down).args(["--redlock", "run", "--wait", wait, "x", "--", "true"]));
        let stderr = stderr_of(&done);
        assert_eq!(
            done.status.code(),
            Some(UNAVAILABLE),
            "--wait {wait}: {stderr}"
        );
        assert!(
            stderr.contains("1 of 3 RedLock masters answered"),
            "{stderr}"
        );
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    }
    // Held elsewhere, all masters up: not acquired.
    let all = urls.join(",");
    let holder = redis_lease::Client::redlock(urls.iter().cloned())
        .build()
        .expect("valid");
    let _held = holder
        .lock("x")
        .expect("valid")
        .with_lease(Duration::from_secs(30))
        .lock()
        .expect("free");
    let done = output(lease(&all).args(["--redlock", "run", "--wait", "0", "x", "--", "true"]));
    assert_eq!(done.status.code(), Some(NOT_ACQUIRED), "{done:?}");
    // Held elsewhere on the one master that answers, whose quorum cannot be had: unavailable.
    let done =
        output(lease(&two_down).args(["--redlock", "run", "--wait", "0", "x", "--", "true"]));
    assert_eq!(done.status.code(), Some(UNAVAILABLE), "{done:?}");
}

#[test]
fn status_says_a_name_whose_tokens_are_exhausted_cannot_be_acquired_and_exits_as_neither_held_nor_free(
) {
    let server = RedisServer::start();
    let url = server.url();
    let mut con = server.connection();
    let _: () = redis::cmd("SET")
        .arg("{worn}:fence")
        .arg(i64::MAX)
        .query(&mut con)
        .expect("SET");
    let text = output(lease(&url).args(["status", "worn"]));
    assert_eq!(
        text.status.code(),
        Some(DATA),
        "neither held nor usable: {text:?}"
    );
    let sentence = stdout_of(&text);
    assert!(
        sentence.contains("is free") && sentence.contains("fencing tokens are exhausted"),
        "{sentence}"
    );
    assert!(
        sentence.contains("no acquisition can succeed"),
        "{sentence}"
    );
    assert!(
        !sentence.contains("no fencing token handed out yet"),
        "{sentence}"
    );
    let json = output(lease(&url).args(["status", "--json", "worn"]));
    let status: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(status["held"], false, "{status}");
    assert_eq!(status["tokens_exhausted"], true, "{status}");
    // And it is so: a run cannot acquire it.
    let run = output(lease(&url).args(["run", "worn", "--", "true"]));
    assert_eq!(run.status.code(), Some(DATA), "{run:?}");
    // A sound name says otherwise.
    let json = output(lease(&url).args(["status", "--json", "fresh"]));
    let status: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(status["tokens_exhausted"], false, "{status}");
}
