//! The `lease` tool at work, as a timeline, against a throwaway redis-server on a free port:
//!
//! 1. four workers contend for one job, each under `lease run`: one at a time, tokens rising;
//! 2. a job three times longer than its lease, kept alive by renewal while others are refused;
//! 3. a holder whose Redis freezes: it is told it lost the lease, and its command is stopped.
//!
//! Run by `scripts/demo`, which builds the tool first; by hand:
//! `cargo run --release -p lease --features cli --example demo -- target/release/lease`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};
use testkit::RedisServer;

static START: OnceLock<Instant> = OnceLock::new();

/// Prints one line of the timeline.
fn say(who: &str, what: &str) {
    let at = START.get_or_init(Instant::now).elapsed().as_secs_f64();
    println!("[{at:6.2}s] {who:<10} | {what}");
}

fn heading(text: &str) {
    println!();
    println!("== {text}");
}

/// Echoes a child's output into the timeline, line by line, under `who`.
fn echo(who: String, stream: impl Read + Send + 'static) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            say(&who, &line);
        }
    })
}

/// One `lease` process whose output joins the timeline.
struct Run {
    who: String,
    child: Child,
    echoes: Vec<thread::JoinHandle<()>>,
}

impl Run {
    fn start(tool: &Path, url: &str, who: &str, args: &[&str]) -> Run {
        let mut child = Command::new(tool)
            .env("LEASE_REDIS_URL", url)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the lease tool");
        let echoes = vec![
            echo(who.to_owned(), child.stdout.take().unwrap()),
            echo(who.to_owned(), child.stderr.take().unwrap()),
        ];
        Run {
            who: who.to_owned(),
            child,
            echoes,
        }
    }

    fn finish(mut self) -> ExitStatus {
        let status = self.child.wait().expect("wait for the lease tool");
        for echo in self.echoes {
            let _ = echo.join();
        }
        say(&self.who, &format!("exit code {}", describe(status)));
        status
    }
}

fn describe(status: ExitStatus) -> String {
    match status.code() {
        Some(0) => "0".into(),
        Some(75) => "75 (not acquired: held elsewhere)".into(),
        Some(79) => "79 (lease lost: the command was stopped)".into(),
        Some(code) => code.to_string(),
        None => format!("{status}"),
    }
}

fn main() {
    let tool = PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("usage: demo PATH-TO-LEASE-BINARY"),
    );
    assert!(tool.is_file(), "{} is not the lease tool", tool.display());
    START.get_or_init(Instant::now);
    let server = RedisServer::start();
    let url = server.url();
    say("demo", &format!("redis-server started at {url}"));

    heading("1. Four workers, one job: each runs it under `lease run`, one at a time");
    let workers: Vec<Run> = (1..=4)
        .map(|n| {
            Run::start(
                &tool,
                &url,
                &format!("worker {n}"),
                &[
                    "--lease",
                    "2s",
                    "run",
                    "--wait",
                    "30s",
                    "nightly-report",
                    "--",
                    "sh",
                    "-c",
                    "echo \"running the report, fencing token $LEASE_TOKEN\"; sleep 0.4; echo done",
                ],
            )
        })
        .collect();
    let all_ok = workers
        .into_iter()
        .map(Run::finish)
        .all(|status| status.success());
    say(
        "demo",
        &format!("every worker ran once, never two at a time: {all_ok}"),
    );

    heading("2. A 3.5 s job on a 1 s lease: renewed while it runs, others refused");
    let long = Run::start(
        &tool,
        &url,
        "long job",
        &[
            "--lease",
            "1s",
            "run",
            "long-job",
            "--",
            "sh",
            "-c",
            "echo 'started (lease 1s, the work takes 3.5s)'; sleep 3.5; echo finished",
        ],
    );
    thread::sleep(Duration::from_millis(1500));
    let status = Command::new(&tool)
        .env("LEASE_REDIS_URL", &url)
        .args(["status", "long-job"])
        .output()
        .expect("lease status");
    say("status", String::from_utf8_lossy(&status.stdout).trim_end());
    thread::sleep(Duration::from_millis(1000));
    Run::start(
        &tool,
        &url,
        "other host",
        &[
            "run",
            "--wait",
            "0",
            "long-job",
            "--",
            "echo",
            "never printed",
        ],
    )
    .finish();
    long.finish();

    heading("3. Redis freezes under a holder: it is told it lost the lease and stops its command");
    let fragile = Run::start(
        &tool,
        &url,
        "holder",
        &[
            "--lease",
            "1s",
            "run",
            "--kill-grace",
            "1s",
            "fragile",
            "--",
            "sh",
            "-c",
            "echo \"working (pid $$), fencing token $LEASE_TOKEN\"; exec sleep 30",
        ],
    );
    thread::sleep(Duration::from_millis(1200));
    server.pause();
    say("demo", "redis-server frozen (SIGSTOP)");
    let lost = fragile.finish();
    server.resume();
    say("demo", "redis-server resumed (SIGCONT)");
    let stopped_in_time = lost.code() == Some(79);

    println!();
    say(
        "demo",
        &format!("done: workers one at a time {all_ok}, lost lease stopped its command {stopped_in_time}"),
    );
    drop(server);
    if !(all_ok && stopped_in_time) {
        std::process::exit(1);
    }
}
