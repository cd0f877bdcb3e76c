//! `lease run` when its own process is the fault: killed or frozen, its stderr broken; and the
//! tool probed with hostile input: keys it cannot use, refusals, leases out of range, secrets.

mod support;
mod tool;

use redis_lease::redis::Commands;
use std::fs;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};
use support::{client, wait_until, RedisServer};
use tool::{finish, gone, lease, output, scratch, shell, spawn, stamps, stderr_of, stdout_of};

const LOST: i32 = 79;
const USAGE: i32 = 64;
const DATA: i32 = 65;
const REFUSED: i32 = 78;

/// A job whose worker (a subshell in the job's process group) ignores SIGTERM and writes a stamp
/// every 20 ms: only SIGKILL of the whole group stops it, and the stamps show when it stopped.
const STUBBORN: &str = "trap '' TERM; \
    (trap '' TERM; while :; do date +%s%N >> FILE; sleep 0.02; done) & \
    echo $! > FILE.pid; wait";

/// Starts the stubborn job under `lease --lease 2s`, and waits until it writes.
fn stubborn_job(url: &str, beats: &std::path::Path) -> (Child, String) {
    let run = spawn(
        lease(url)
            .args(["--lease", "2s", "run", "job"])
            .args(shell(STUBBORN, beats)),
    );
    let pid_file = format!("{}.pid", beats.display());
    wait_until("the job writes", || {
        stamps(beats).len() >= 2 && fs::read_to_string(&pid_file).is_ok_and(|p| p.ends_with('\n'))
    });
    let worker = fs::read_to_string(&pid_file)
        .expect("pid")
        .trim()
        .to_owned();
    (run, worker)
}

/// A second `lease run` of the same job, once the first's lease has run out: returns when its
/// command started, in wall-clock nanoseconds.
fn second_run_starts(url: &str) -> u128 {
    let (_dir, start) = scratch("second");
    let second = output(
        lease(url)
            .args(["--lease", "2s", "run", "--wait", "20s", "job"])
            .args(shell("date +%s%N > FILE", &start)),
    );
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    stamps(&start)[0]
}

fn kill(signal: &str, pid: u32) {
    let sent = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
}

/// Consul #2022: when `lease run` finds its lease lost by itself (the server frozen), it stops
/// the whole job, the worker its shell started too, and before the lease could have lapsed.
#[test]
fn a_lost_lease_stops_the_jobs_worker_too_before_the_lease_lapses() {
    let server = RedisServer::start();
    let (_dir, beats) = scratch("beats");
    let (run, worker) = stubborn_job(&server.url(), &beats);
    let paused_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos();
    server.pause();
    let done = finish(run, Duration::from_secs(15));
    server.resume();
    assert_eq!(done.status.code(), Some(LOST), "{done:?}");
    assert!(gone(&worker), "the job's worker {worker} still runs");
    let last = *stamps(&beats).last().expect("stamps");
    // The lease (2 s) was last renewed before the pause, so it lapses 2 s after it at the latest.
    assert!(
        last < paused_at + 2_000_000_000,
        "the worker wrote {} ms after the pause",
        (last - paused_at) / 1_000_000
    );
}

/// Starts a stubborn job under `lease run` reaching Redis at `url`, does `fault` to the first
/// `lease` process, and checks that the job wrote its last beat before a second `lease run`
/// (on `server` directly) started its copy, and is gone. Hands back the first `lease` process.
fn first_copy_stops_before_a_second_starts(
    server: &RedisServer,
    url: &str,
    fault: impl FnOnce(&Child),
) -> Child {
    let (_dir, beats) = scratch("beats");
    let (run, worker) = stubborn_job(url, &beats);
    fault(&run);
    let second = second_run_starts(&server.url());
    let last = *stamps(&beats).last().expect("stamps");
    assert!(
        last < second,
        "the first copy wrote {} ms after the second started",
        (last - second) / 1_000_000
    );
    assert!(gone(&worker), "the first copy's worker {worker} still runs");
    run
}

#[test]
fn a_job_is_stopped_before_a_second_copy_starts_when_lease_is_killed() {
    let server = RedisServer::start();
    let mut run = first_copy_stops_before_a_second_starts(&server, &server.url(), |run| {
        kill("-KILL", run.id())
    });
    run.wait().expect("the killed lease reaped");
}

#[test]
fn a_job_is_stopped_before_a_second_copy_starts_when_lease_is_frozen() {
    let server = RedisServer::start();
    let run = first_copy_stops_before_a_second_starts(&server, &server.url(), |run| {
        kill("-STOP", run.id())
    });
    // The dead-man's switch woke the frozen `lease`, which found its lease lost.
    let done = finish(run, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(LOST), "{done:?}");
}

/// Consul #9788: `lease run` cut off from Redis by a silent network (its connections open,
/// nothing passing) while a second copy waits on the same lock. The first copy's job, its worker
/// too, stops before the second starts, and the first `lease` exits with the lost code.
#[test]
fn a_job_is_stopped_before_a_second_copy_starts_when_its_lease_is_cut_off() {
    let server = RedisServer::start();
    let proxy = testkit::Proxy::start(([127, 0, 0, 1], server.port()).into());
    let url = format!("redis://{}", proxy.addr());
    let run = first_copy_stops_before_a_second_starts(&server, &url, |_| proxy.freeze());
    let done = finish(run, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(LOST), "{done:?}");
}

/// A job that says it started in FILE.up, notes its SIGTERM in FILE and exits 0 a moment later,
/// as a job that cleans up does.
const CLEANS_UP: &str = "trap 'date +%s%N > FILE; sleep 0.3; exit 0' TERM; \
    echo > FILE.up; while :; do sleep 0.02; done";

#[test]
fn a_job_the_switch_stopped_is_reported_lost_even_when_a_renewal_comes_later() {
    // `lease` frozen long enough for the dead-man's switch to send SIGTERM, then continued
    // before the deadline: its renewal succeeds, and the job exits 0 after the signal. Before,
    // `lease` saw a valid hold and a job that ended on its own, and exited 0 without a word.
    let server = RedisServer::start();
    let (_dir, term) = scratch("term");
    let run = spawn(
        lease(&server.url())
            .args(["--lease", "2s", "run", "job"])
            .args(shell(CLEANS_UP, &term)),
    );
    let lock = client(&server).lock("job").expect("valid");
    let up = term.with_extension("up");
    wait_until("the job runs", || up.exists());
    kill("-STOP", run.id());
    wait_until("the switch sends the job SIGTERM", || {
        !stamps(&term).is_empty()
    });
    kill("-CONT", run.id());
    let done = finish(run, Duration::from_secs(10));
    let said = stderr_of(&done);
    assert_eq!(done.status.code(), Some(LOST), "{said}");
    // Said by the switch's news, or by `lease` itself if it looked at its deadline first.
    assert!(said.contains("no renewal of \"job\""), "{said}");
    // The hold was good again when the job ended: released, not left to lapse.
    assert!(!lock.is_locked().expect("reachable"), "{said}");
}

#[test]
fn a_waiter_whose_program_is_replaced_while_it_waits_still_runs_its_command() {
    // An upgrade or a rebuild during a long `--wait`: the file `lease` was started from is
    // replaced. Its helpers (the dead-man's switch, the command's first moment) are started
    // from the program that runs, not from the path, which now names another file.
    let server = RedisServer::start();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let program = dir.path().join("lease");
    fs::copy(env!("CARGO_BIN_EXE_lease"), &program).expect("copy the tool");
    let (_scratch, ran) = scratch("ran");
    let holder = client(&server).lock("job").expect("valid");
    let held = holder.lock().expect("reachable");
    let waiter = spawn(
        tool::bare_from(&program)
            .env("LEASE_REDIS_URL", server.url())
            .args(["run", "--wait", "20s", "job"])
            .args(shell("echo ran > FILE", &ran)),
    );
    let exe = format!("/proc/{}/exe", waiter.id());
    wait_until("the waiter runs the copy", || {
        fs::read_link(&exe).is_ok_and(|path| path == program)
    });
    // The new version: another file renamed over the old one's path.
    let new = dir.path().join("lease.new");
    fs::write(&new, "#!/bin/sh\nexit 42\n").expect("write the new version");
    fs::rename(&new, &program).expect("replace the tool");
    held.unlock().expect("released");
    let done = finish(waiter, Duration::from_secs(20));
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    assert_eq!(fs::read_to_string(&ran).expect("the command ran"), "ran\n");
}

#[test]
fn a_broken_stderr_never_stands_between_a_loss_and_the_kill() {
    let server = RedisServer::start();
    let started = Instant::now();
    let mut run = lease(&server.url())
        .args(["--lease", "2s", "run", "p", "--", "sleep", "6"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lease");
    drop(run.stderr.take());
    let lock = client(&server).lock("p").expect("valid");
    wait_until("the job holds the lock", || {
        lock.is_locked().expect("reachable")
    });
    assert!(lock.force_unlock().expect("reachable"));
    let done = finish(run, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(LOST), "{done:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the command was not stopped: {:?}",
        started.elapsed()
    );
    // Nor does a closed stdout make `status` panic.
    let mut status = lease(&server.url())
        .args(["status", "p"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lease");
    drop(status.stdout.take());
    let done = finish(status, Duration::from_secs(10));
    assert!(matches!(done.status.code(), Some(0 | 1)), "{done:?}");
    assert!(!String::from_utf8_lossy(&done.stderr).contains("panicked"));
}

#[test]
fn a_signal_while_waiting_for_the_lock_ends_the_wait_and_no_job_starts() {
    let server = RedisServer::start();
    let holder = client(&server).lock("busy").expect("valid");
    let held = holder.lock().expect("free");
    let (_dir, started) = scratch("started");
    let run = spawn(
        lease(&server.url())
            .args(["run", "--wait", "30s", "busy"])
            .args(shell("echo started > FILE", &started)),
    );
    wait_until("lease waits for the lock", || {
        server.subscribers("{busy}:freed") > 0
    });
    kill("-TERM", run.id());
    let done = finish(run, Duration::from_secs(5));
    assert!(!done.status.success(), "{done:?}");
    // Freed now, the lock must not start a job that was told to stop before it held it.
    held.unlock().expect("held");
    thread::sleep(Duration::from_millis(500));
    assert!(
        !started.exists(),
        "the job started after lease was told to stop"
    );
}

#[test]
fn a_force_unlocked_job_gets_its_grace_before_sigkill() {
    let server = RedisServer::start();
    let (_dir, graceful) = scratch("graceful");
    // On SIGTERM the job takes 300 ms to finish, well within its 1 s grace.
    let run = spawn(
        lease(&server.url())
            .args(["--lease", "3s", "run", "--kill-grace", "1s", "g"])
            .args(shell(
                "trap 'sleep 0.3; echo graceful > FILE; exit 0' TERM; while :; do sleep 0.05; done",
                &graceful,
            )),
    );
    let lock = client(&server).lock("g").expect("valid");
    wait_until("the job holds the lock", || {
        lock.is_locked().expect("reachable")
    });
    thread::sleep(Duration::from_millis(200));
    assert!(lock.force_unlock().expect("reachable"));
    let done = finish(run, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(LOST), "{done:?}");
    assert_eq!(
        fs::read_to_string(&graceful).unwrap_or_default().trim(),
        "graceful",
        "the job was killed before its grace was over: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(
        stderr.matches("lost the lease").count(),
        1,
        "one loss, told once: {stderr}"
    );
}

#[test]
fn a_full_stderr_with_every_record_logged_never_stands_between_a_loss_and_the_kill() {
    let server = RedisServer::start();
    // A pipe nobody reads, filled to the brim before `lease` starts: every write to it blocks.
    let (reader, writer) = nix::unistd::pipe().expect("a pipe");
    let mut filler = fs::File::from(writer.try_clone().expect("dup"));
    let filling = std::thread::spawn(move || {
        let chunk = [b'x'; 4096];
        while filler.write_all(&chunk).is_ok() {}
    });
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let run = lease(&server.url())
        .args(["-vv", "--lease", "2s", "run", "p", "--", "sleep", "6"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(writer))
        .spawn()
        .expect("start lease");
    let lock = client(&server).lock("p").expect("valid");
    wait_until("the job holds the lock", || {
        lock.is_locked().expect("reachable")
    });
    assert!(lock.force_unlock().expect("reachable"));
    let done = finish(run, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(LOST), "{done:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the command was not stopped: {:?}",
        started.elapsed()
    );
    drop(reader);
    filling.join().expect("the filler ends with the pipe");
}

#[test]
fn keys_a_lock_cannot_use_get_the_data_code_and_status_and_unlock_still_work() {
    let server = RedisServer::start();
    let url = server.url();
    let mut con = server.connection();
    let _: () = con.set("{bad}", "not a lock").expect("SET");
    let run = output(lease(&url).args(["run", "bad", "--", "true"]));
    assert_eq!(run.status.code(), Some(DATA), "{run:?}");
    let status = output(lease(&url).args(["status", "bad"]));
    assert_eq!(
        status.status.code(),
        Some(DATA),
        "neither held nor free: {status:?}"
    );
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("problem") && text.contains("string"),
        "{text}"
    );
    let unlocked = output(lease(&url).args(["unlock", "--force", "bad"]));
    assert_eq!(unlocked.status.code(), Some(0), "{unlocked:?}");
    let _: () = con.set("{worn}:fence", "9223372036854775807").expect("SET");
    let worn = output(lease(&url).args(["run", "worn", "--", "true"]));
    assert_eq!(worn.status.code(), Some(DATA), "{worn:?}");
}

#[test]
fn leases_out_of_range_are_usage_errors() {
    let server = RedisServer::start();
    for lease_arg in ["1ns", "2ms", "9ms", "400years"] {
        let done =
            output(lease(&server.url()).args(["--lease", lease_arg, "run", "x", "--", "true"]));
        assert_eq!(done.status.code(), Some(USAGE), "{lease_arg}: {done:?}");
    }
}

#[test]
fn passwords_stay_out_of_help_errors_and_the_commands_environment() {
    let server = RedisServer::start_with(&["--requirepass", "hunter2"]);
    let port = server.port();
    let with_password = format!("redis://:hunter2@127.0.0.1:{port}");
    let help = output(lease(&with_password).arg("--help"));
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("LEASE_REDIS_URL") && !help.contains("hunter2"),
        "{help}"
    );

    let wrong = output(lease(&format!("redis://:wrong@127.0.0.1:{port}")).args(["status", "x"]));
    assert_eq!(wrong.status.code(), Some(REFUSED), "{wrong:?}");
    assert!(!String::from_utf8_lossy(&wrong.stderr).contains("wrong"));
    let malformed = output(lease("redis://:hunter2@127.0.0.1:notaport").args(["status", "x"]));
    assert_eq!(malformed.status.code(), Some(USAGE), "{malformed:?}");
    assert!(!String::from_utf8_lossy(&malformed.stderr).contains("hunter2"));
    // Passwords with the characters that end a URL's parts, or the list of URLs, unescaped.
    for (url, topology) in [
        ("redis://:hun/ter2@127.0.0.1:1", None),
        ("redis://:hun?ter2@127.0.0.1:1", None),
        ("redis://:hun#ter2@127.0.0.1:1", None),
        ("redis://:hun,ter2@127.0.0.1:1", None),
        ("redis://:hun,ter2@127.0.0.1:1", Some("--cluster")),
        ("redis://:hun,ter2@127.0.0.1:1", Some("--redlock")),
        ("redis://:hun,ter,2@127.0.0.1:1", Some("--cluster")),
        ("redis://hun:1234,ter2@127.0.0.1:1", None),
    ] {
        let mut command = lease(url);
        command.args(["-vv", "--connect-timeout", "200ms"]);
        command.args(topology);
        let shown = output(command.args(["status", "x"]));
        let stderr = String::from_utf8_lossy(&shown.stderr);
        assert!(
            !stderr.contains("hun") && !stderr.contains("ter2"),
            "{url} {topology:?}: {stderr}"
        );
    }

    // Given apart from the URL: in the environment, or in a file.
    let plain = format!("redis://127.0.0.1:{port}");
    let env = output(
        lease(&plain)
            .env("LEASE_REDIS_PASSWORD", "hunter2")
            .env("REDIS_URL", &with_password)
            .args(["run", "x", "--", "env"]),
    );
    assert_eq!(env.status.code(), Some(0), "{env:?}");
    let seen = String::from_utf8_lossy(&env.stdout);
    assert!(seen.contains("LEASE_HELD=1"), "{seen}");
    for secret in [
        "hunter2",
        "LEASE_REDIS_URL",
        "LEASE_REDIS_PASSWORD",
        "REDIS_URL=",
    ] {
        assert!(
            !seen.contains(secret),
            "{secret} reached the command:\n{seen}"
        );
    }
    let (_dir, file) = scratch("password");
    fs::write(&file, "hunter2\n").expect("write");
    let from_file = output(
        lease(&plain)
            .arg("--password-file")
            .arg(&file)
            .args(["status", "x"]),
    );
    assert_eq!(from_file.status.code(), Some(1), "free: {from_file:?}");
}

#[test]
fn socket_passwords_stay_out_of_the_log_the_status_and_errors() {
    let server = RedisServer::start_with(&["--requirepass", "hunter2"]);
    let socket = server.unix_socket();
    let socket = socket.display();
    // The forms the `redis` crate reads a socket's password from.
    for url in [
        format!("redis+unix://{socket}?pass=hunter2"),
        format!("unix://{socket}?pass=hunter2"),
        format!("valkey+unix://{socket}?db=0&pass=hunter2"),
        format!("REDIS+UNIX://{socket}?pass=hunter2"),
    ] {
        let done = output(lease(&url).args(["-vv", "status", "--json", "x"]));
        assert_eq!(done.status.code(), Some(1), "free: {url}: {done:?}");
        let (stdout, stderr) = (stdout_of(&done), stderr_of(&done));
        assert!(
            stderr.contains("(from $LEASE_REDIS_URL)"),
            "{url}: {stderr}"
        );
        let status: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
        let node = status["node"].as_str().unwrap_or_default();
        assert!(node.contains("pass=***"), "{url}: {stdout}");
        assert!(
            !stdout.contains("hunter2") && !stderr.contains("hunter2"),
            "{url}:\n{stdout}\n{stderr}"
        );
        let plain = output(lease(&url).args(["status", "x"]));
        assert_eq!(plain.status.code(), Some(1), "free: {url}: {plain:?}");
        assert!(!stdout_of(&plain).contains("hunter2"), "{plain:?}");
    }
    // Forms it reads no password from, or a wrong one: refused, and never shown.
    for url in [
        format!("redis+unix://{socket}?pass=badpass"),
        format!("redis+unix://{socket}?password=badpass"),
        format!("redis+unix://:badpass@localhost{socket}"),
        format!("redis+unix://{socket}?pass=bad%26pass&db=0"),
        format!("redis+unix://{socket}?pass=bad&pass"),
    ] {
        let done = output(lease(&url).args(["-vv", "status", "--json", "x"]));
        assert_eq!(done.status.code(), Some(REFUSED), "{url}: {done:?}");
        let (stdout, stderr) = (stdout_of(&done), stderr_of(&done));
        assert!(
            !stdout.contains("bad") && !stderr.contains("bad"),
            "{url}:\n{stdout}\n{stderr}"
        );
    }
    // A run: its log, and the command's environment.
    let url = format!("redis+unix://{socket}?pass=hunter2");
    let run = output(lease(&url).args(["-v", "run", "x", "--", "env"]));
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    assert!(
        !stdout_of(&run).contains("hunter2") && !stderr_of(&run).contains("hunter2"),
        "{run:?}"
    );
}

#[test]
fn a_lease_below_the_floor_is_refused_naming_it_and_one_at_the_floor_is_kept() {
    let server = RedisServer::start();
    let url = server.url();
    for below in ["10ms", "30ms", "299ms"] {
        let done = output(lease(&url).args(["--lease", below, "run", "x", "--", "true"]));
        let stderr = stderr_of(&done);
        assert_eq!(done.status.code(), Some(USAGE), "{below}: {stderr}");
        assert!(
            stderr.contains(&format!("invalid value '{below}' for '--lease <DURATION>'"))
                && stderr.contains("the shortest lease the tool can keep is 300ms"),
            "{below}: {stderr}"
        );
    }
    let from_env = output(
        lease(&url)
            .env("LEASE_LEASE", "20ms")
            .args(["run", "x", "--", "true"]),
    );
    assert_eq!(from_env.status.code(), Some(USAGE), "{from_env:?}");
    assert!(
        stderr_of(&from_env).contains("(from $LEASE_LEASE)"),
        "{from_env:?}"
    );
    // Taken and run: whether a lease this short is kept through many renewals depends on how
    // busy the machine is, which the library's tests check on a manual clock.
    let at_floor = output(lease(&url).args(["--lease", "300ms", "run", "x", "--", "true"]));
    assert_eq!(at_floor.status.code(), Some(0), "{at_floor:?}");
    assert_eq!(stderr_of(&at_floor), "", "{at_floor:?}");
}
