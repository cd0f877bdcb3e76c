//! The `lease` tool at work, as a timeline, against a throwaway redis-server on a free port:
//!
//! 1. four workers contend for one job, each under `lease run`: one at a time, tokens rising;
//! 2. a job three times longer than its lease, kept alive by renewal while others are refused;
//! 3. five exports on at most two hosts at once: `lease run --permits 2`, a semaphore whose
//!    permits are leases (on Redis and PostgreSQL);
//! 4. a holder whose server freezes: it is told it lost the lease, and its command is stopped;
//! 5. two schedulers under `lease run --value`, one leader at a time with rising terms, followed
//!    by `lease leader --follow`.
//!
//! With `cluster` after the tool's path, the same timeline runs on a throwaway Redis Cluster (3
//! masters, 3 replicas), the tool given its nodes as seeds; step 4 freezes the master of the job's
//! slot. With `zookeeper`, it runs on a throwaway standalone ZooKeeper, the tool given
//! `--zookeeper`, and step 3 is skipped (ZooKeeper offers no semaphore yet); step 4 freezes
//! ZooKeeper. With `postgres`, it runs on a throwaway PostgreSQL 15 (a fresh cluster on a free
//! port), the tool given its `postgres://` URL, and step 4 freezes the database.
//!
//! Run by `scripts/demo [cluster|zookeeper|postgres]`, which builds the tool first; by hand:
//! `cargo run --release -p lease-cli --example lock_demo -- target/release/lease [cluster|zookeeper|postgres]`
//! (the tool is `release/lease` in cargo's target directory, wherever `CARGO_TARGET_DIR` puts it).
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};
use testkit::{PgServer, RedisCluster, RedisServer, ZooKeeper};

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

/// What the demo runs against: one server, a cluster (the tool then takes `--cluster`), a
/// ZooKeeper (the tool then takes `--zookeeper`), or a PostgreSQL database (its `postgres://`
/// URL).
enum Deployment {
    Server(RedisServer),
    Cluster(RedisCluster),
    ZooKeeper(ZooKeeper),
    Postgres(PgServer),
}

impl Deployment {
    fn url(&self) -> String {
        match self {
            Deployment::Server(server) => server.url(),
            Deployment::Cluster(cluster) => cluster.seed_urls().join(","),
            Deployment::ZooKeeper(_) => String::new(),
            Deployment::Postgres(server) => server.url(),
        }
    }

    /// The tool's arguments for this deployment, before `args`.
    fn args(&self, args: &[&str]) -> Vec<String> {
        let mut all = match self {
            Deployment::Server(_) | Deployment::Postgres(_) => Vec::new(),
            Deployment::Cluster(_) => vec!["--cluster".to_owned()],
            Deployment::ZooKeeper(zk) => vec!["--zookeeper".to_owned(), zk.connect_string()],
        };
        all.extend(args.iter().map(|arg| (*arg).to_owned()));
        all
    }

    /// Freezes (SIGSTOP) the server that holds lock `name`, or resumes it.
    fn freeze(&self, name: &str, frozen: bool) -> String {
        match self {
            Deployment::Server(server) => {
                if frozen {
                    server.pause()
                } else {
                    server.resume()
                }
                "redis-server".into()
            }
            Deployment::Cluster(cluster) => {
                let master = cluster.master_for_key(format!("{{{name}}}"));
                if frozen {
                    cluster.pause(master)
                } else {
                    cluster.resume(master)
                }
                format!("the master of {name:?}'s slot (port {master})")
            }
            Deployment::ZooKeeper(zk) => {
                if frozen {
                    zk.pause()
                } else {
                    zk.resume()
                }
                "ZooKeeper".into()
            }
            Deployment::Postgres(server) => {
                if frozen {
                    server.pause()
                } else {
                    server.resume()
                }
                "PostgreSQL".into()
            }
        }
    }
}

/// One `lease` process whose output joins the timeline.
struct Run {
    who: String,
    child: Child,
    echoes: Vec<thread::JoinHandle<()>>,
}

impl Run {
    fn start(tool: &Path, on: &Deployment, who: &str, args: &[&str]) -> Run {
        let mut child = Command::new(tool)
            .env("LEASE_REDIS_URL", on.url())
            .args(on.args(args))
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

    /// Ends a run that would go on by itself (a follower), and reaps it.
    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for echo in self.echoes {
            let _ = echo.join();
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
    let on = match std::env::args().nth(2).as_deref() {
        Some("cluster") => Deployment::Cluster(RedisCluster::start(3, 1)),
        Some("zookeeper") => Deployment::ZooKeeper(ZooKeeper::start()),
        Some("postgres") => Deployment::Postgres(PgServer::start()),
        None => Deployment::Server(RedisServer::start()),
        Some(other) => {
            panic!("usage: demo PATH-TO-LEASE-BINARY [cluster|zookeeper|postgres], not {other:?}")
        }
    };
    match &on {
        Deployment::Server(server) => {
            say("demo", &format!("redis-server started at {}", server.url()))
        }
        Deployment::Cluster(cluster) => say(
            "demo",
            &format!(
                "a Redis Cluster started: masters on ports {:?}, each with a replica",
                cluster.masters()
            ),
        ),
        Deployment::ZooKeeper(zk) => say(
            "demo",
            &format!("ZooKeeper started at {}", zk.connect_string()),
        ),
        Deployment::Postgres(server) => say(
            "demo",
            &format!(
                "PostgreSQL started at {} (the locks in its schema \"lease\")",
                server.url()
            ),
        ),
    }

    heading("1. Four workers, one job: each runs it under `lease run`, one at a time");
    let workers: Vec<Run> = (1..=4)
        .map(|n| {
            Run::start(
                &tool,
                &on,
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
        &on,
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
        .env("LEASE_REDIS_URL", on.url())
        .args(on.args(&["status", "long-job"]))
        .output()
        .expect("lease status");
    say("status", String::from_utf8_lossy(&status.stdout).trim_end());
    thread::sleep(Duration::from_millis(1000));
    Run::start(
        &tool,
        &on,
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

    let permits_ok = if matches!(on, Deployment::ZooKeeper(_)) {
        true
    } else {
        heading("3. Five exports, at most two at a time: `lease run --permits 2`");
        let exports: Vec<Run> = (1..=5)
            .map(|n| {
                Run::start(
                    &tool,
                    &on,
                    &format!("export {n}"),
                    &[
                        "--lease",
                        "2s",
                        "run",
                        "--permits",
                        "2",
                        "--wait",
                        "30s",
                        "exports",
                        "--",
                        "sh",
                        "-c",
                        "echo \"exporting, token $LEASE_TOKEN\"; sleep 0.6; echo done",
                    ],
                )
            })
            .collect();
        thread::sleep(Duration::from_millis(300));
        let status = Command::new(&tool)
            .env("LEASE_REDIS_URL", on.url())
            .args(on.args(&["status", "--permits", "2", "exports"]))
            .output()
            .expect("lease status");
        say("status", String::from_utf8_lossy(&status.stdout).trim_end());
        let ok = exports
            .into_iter()
            .map(Run::finish)
            .all(|status| status.success());
        say("demo", &format!("every export ran, two at a time: {ok}"));
        ok
    };

    heading(
        "4. The server freezes under a holder: it is told it lost the lease and stops its command",
    );
    let fragile = Run::start(
        &tool,
        &on,
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
    let frozen = on.freeze("fragile", true);
    say("demo", &format!("{frozen} frozen (SIGSTOP)"));
    let lost = fragile.finish();
    on.freeze("fragile", false);
    say("demo", &format!("{frozen} resumed (SIGCONT)"));
    let stopped_in_time = lost.code() == Some(79);

    heading(
        "5. Two schedulers, one leader at a time: `lease run --value`, `lease leader --follow`",
    );
    let follower = Run::start(&tool, &on, "follower", &["leader", "scheduler", "--follow"]);
    thread::sleep(Duration::from_millis(300));
    let schedulers: Vec<Run> = ["host-a", "host-b"]
        .iter()
        .map(|host| {
            let run = Run::start(
                &tool,
                &on,
                host,
                &[
                    "--lease",
                    "1s",
                    "run",
                    "--value",
                    host,
                    "--wait",
                    "30s",
                    "scheduler",
                    "--",
                    "sh",
                    "-c",
                    "echo \"leading, term $LEASE_TOKEN\"; sleep 0.8; echo \"stepping down\"",
                ],
            );
            thread::sleep(Duration::from_millis(100));
            run
        })
        .collect();
    let leaders_ok = schedulers
        .into_iter()
        .map(Run::finish)
        .all(|status| status.success());
    thread::sleep(Duration::from_millis(300));
    follower.stop();
    say("demo", &format!("each scheduler led in turn: {leaders_ok}"));

    println!();
    say(
        "demo",
        &format!(
            "done: workers one at a time {all_ok}, exports two at a time {permits_ok}, lost \
             lease stopped its command {stopped_in_time}, leaders one at a time {leaders_ok}"
        ),
    );
    drop(on);
    if !(all_ok && permits_ok && stopped_in_time && leaders_ok) {
        std::process::exit(1);
    }
}
