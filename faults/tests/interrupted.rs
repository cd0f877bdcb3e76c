//! A client's call to the resource server, waiting for its reply when the client's process is
//! stopped (SIGSTOP) and continued (SIGCONT), goes on waiting and gets the reply. Linux fails
//! such a wait with EINTR when the socket has a timeout (signal(7), "Interruption of system calls
//! and library functions by stop signals"), and the suite stops clients on purpose. The process
//! stopped here is this test's own, which is why these tests are alone in their file, one at a
//! time.

use faults::resource::Connection;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{mpsc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};
use testkit::RedisServer;

/// Held by each test: a test stops the whole process.
static ALONE: Mutex<()> = Mutex::new(());

/// Stops the process `$1` and waits (5 s at most) until every thread of it has stopped; a
/// stopped process cannot let itself run again, so this shell does.
const STOP: &str = r#"
kill -STOP "$1"
tries=0
while grep -h '^State:' /proc/"$1"/task/*/status | grep -qv 'T (stopped)' && [ $tries -lt 500 ]; do
    tries=$((tries + 1))
    sleep 0.01
done
"#;

/// Lets the server `$2` run again, waits (10 s at most) until a reply from its port `$3` (four
/// hexadecimal digits, as `/proc/net/tcp` writes it) waits unread in a socket, then `$4` seconds.
const REPLY_COMES: &str = r#"
kill -CONT "$2"
tries=0
until awk -v from=":$3" '$3 ~ from "$" && $5 !~ /:0+$/ { found = 1 } END { exit !found }' \
    /proc/net/tcp || [ $tries -ge 1000 ]; do
    tries=$((tries + 1))
    sleep 0.01
done
sleep "$4"
"#;

const CONTINUE: &str = r#"kill -CONT "$1""#;

/// Runs `script` with `args` after `$0`; it gets this process's id as `$1`.
fn shell(script: &str, args: &[String]) {
    let status = Command::new("sh")
        .args(["-c", script, "sh", &std::process::id().to_string()])
        .args(args)
        .status()
        .expect("a shell");
    assert!(
        status.success(),
        "the shell stopping this process: {status}"
    );
}

/// The system call the thread whose `/proc` entry is `task` is blocked in, if any.
fn blocked_in(task: &Path) -> Option<i64> {
    std::fs::read_to_string(task.join("syscall"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Sends PING on `resource` from a thread of its own, and returns once that thread waits for
/// the reply.
fn ping(mut resource: Connection) -> JoinHandle<redis::RedisResult<String>> {
    let (tell, task) = mpsc::channel();
    let call = thread::spawn(move || {
        let _ = tell.send(std::fs::read_link("/proc/thread-self"));
        redis::cmd("PING").query::<String>(&mut resource)
    });
    let task = PathBuf::from("/proc").join(
        task.recv()
            .expect("the calling thread's news")
            .expect("the calling thread's /proc entry"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while blocked_in(&task) != Some(nix::libc::SYS_recvfrom) {
        assert!(
            Instant::now() < deadline,
            "the call never waited for its reply"
        );
        thread::sleep(Duration::from_millis(1));
    }
    call
}

/// The process id of the `redis-server` listening on `port`.
fn server_pid(port: u16) -> String {
    let listening = format!(":{port}");
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline")).is_ok_and(|line| {
                line.contains("redis-server") && line.trim_end_matches('\0').ends_with(&listening)
            })
        })
        .expect("the server's process")
}

#[test]
fn a_call_waiting_for_its_reply_rides_out_a_stop_of_its_process() {
    let _alone = ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let server = RedisServer::start();
    let resource = Connection::open(&server.url(), Duration::from_secs(10)).expect("a connection");
    // Frozen, so that the call waits for its reply until the server is let run again.
    server.pause();
    let call = ping(resource);
    shell(&[STOP, CONTINUE].concat(), &[]);
    server.resume();
    let reply = call.join().expect("the calling thread");
    assert_eq!(reply.expect("the reply to the call").as_str(), "PONG");
}

#[test]
fn a_reply_that_came_while_the_process_was_stopped_past_the_deadline_is_read() {
    let _alone = ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let server = RedisServer::start();
    let pid = server_pid(server.port());
    let timeout = Duration::from_secs(3);
    let resource = Connection::open(&server.url(), timeout).expect("a connection");
    // Frozen here, let run again by the shell once this process has stopped.
    let frozen = Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .expect("kill");
    assert!(frozen.success());
    let call = ping(resource);
    // Stopped until the reply has come and the call's whole timeout has passed since.
    let args = [
        pid,
        format!("{:04X}", server.port()),
        timeout.as_secs().to_string(),
    ];
    shell(&[STOP, REPLY_COMES, CONTINUE].concat(), &args);
    let reply = call.join().expect("the calling thread");
    assert_eq!(reply.expect("the reply to the call").as_str(), "PONG");
}
