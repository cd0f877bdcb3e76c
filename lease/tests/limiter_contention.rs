//! The rate limiter under contention: two processes of eight threads each take grants of one
//! limiter for a while (`LEASE_LIMITER_SECONDS`, 2 s unless set; `scripts/limiter-contention`
//! runs 10 s), logging every grant with the host's monotonic clock before its call and after
//! it, and the store's time of the grant. No `limit + 1` grants fit in a window shorter than
//! the limiter's (the sound check on the calls' intervals), the store's times keep the limit
//! exactly, and the limiter was kept busy. On one server, through Sentinel, on a Cluster and on
//! PostgreSQL; with the store frozen and then killed and restarted during the run (its log kept
//! on disk, and found again after); with the clients' wall clocks stepped (libfaketime).

mod common;

use common::limiter::{
    a_limiter_works, check_intervals, check_store_times, from_line, monotonic_ns, to_line, Logged,
};
use common::RedisServer;
use redis_lease::{Client, RateLimiter};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use testkit::{RedisCluster, SentinelSet};

const LIMIT: u64 = 20;
const WINDOW: Duration = Duration::from_millis(100);
const PROCESSES: usize = 2;
const THREADS: usize = 8;
const NAME: &str = "contended";

/// How long a run with the store frozen and restarted takes grants: long enough for the store
/// to come back and grant again.
fn fault_run() -> Duration {
    run_for().max(Duration::from_secs(5))
}

/// How long each run takes grants.
fn run_for() -> Duration {
    let seconds = std::env::var("LEASE_LIMITER_SECONDS")
        .ok()
        .and_then(|seconds| seconds.parse().ok())
        .unwrap_or(2.0);
    Duration::from_secs_f64(seconds)
}

/// Where a child connects: `server URL`, `sentinel MASTER URL,URL,..`, `cluster URL,URL,..` or
/// `postgres URL`.
fn connect(store: &str) -> Client {
    let mut words = store.split(' ');
    let (kind, first) = (words.next(), words.next().unwrap_or_default());
    let builder = match kind {
        Some("server") => Client::builder(first),
        Some("sentinel") => Client::sentinel(first, words.next().unwrap_or_default().split(',')),
        Some("cluster") => Client::cluster(first.split(',')),
        #[cfg(feature = "postgres")]
        Some("postgres") => Client::postgres(first),
        _ => panic!("a store spec: {store:?}"),
    };
    builder
        .connect_timeout(Duration::from_millis(500))
        .command_timeout(Duration::from_millis(500))
        .build()
        .expect("valid settings")
}

/// The child half: runs only when the parent sets the variables. Eight threads take one grant
/// at a time, each waiting up to a second, until the run ends, and log what they got.
#[test]
// The child's count of grants and failed calls goes to its parent's log of the run.
#[allow(clippy::print_stderr)]
fn child_process_entry() {
    let (Ok(store), Ok(log), Ok(millis)) = (
        std::env::var("LEASE_LIMITER_STORE"),
        std::env::var("LEASE_LIMITER_LOG"),
        std::env::var("LEASE_LIMITER_MILLIS"),
    ) else {
        return;
    };
    let until = Instant::now() + Duration::from_millis(millis.parse().expect("a number"));
    let client = connect(&store);
    let limiter = client.rate_limiter(NAME, LIMIT, WINDOW).expect("valid");
    let failed = AtomicU64::new(0);
    let grants: Vec<Logged> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|_| scope.spawn(|| take_until(&limiter, until, &failed)))
            .collect();
        threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("a taker ends"))
            .collect()
    });
    let mut file = std::fs::File::create(log).expect("a log file");
    for grant in &grants {
        file.write_all(to_line(grant).as_bytes()).expect("written");
    }
    eprintln!(
        "{} grants, {} calls failed",
        grants.len(),
        failed.load(Ordering::SeqCst)
    );
}

/// Takes one grant after another until `until`, logging each.
fn take_until(limiter: &RateLimiter, until: Instant, failed: &AtomicU64) -> Vec<Logged> {
    let mut grants = Vec::new();
    while Instant::now() < until {
        let before = monotonic_ns();
        match limiter.try_acquire_for(1, Duration::from_secs(1)) {
            Ok(Some(granted)) => grants.push(Logged {
                before,
                after: monotonic_ns(),
                at: granted.granted_at(),
            }),
            Ok(None) => {}
            Err(_) => {
                // The store frozen or restarting: the next call tries again.
                failed.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    grants
}

/// Two children taking grants from `store` for `run`, their wall clocks read from `clock` if
/// given.
fn spawn_children(store: &str, run: Duration, dir: &Path, clock: Option<&Path>) -> Vec<Child> {
    (0..PROCESSES)
        .map(|index| {
            let mut command = Command::new(std::env::current_exe().expect("the test binary"));
            command
                .args([
                    "--exact",
                    "child_process_entry",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("LEASE_LIMITER_STORE", store)
                .env("LEASE_LIMITER_LOG", dir.join(format!("grants-{index}")))
                .env("LEASE_LIMITER_MILLIS", run.as_millis().to_string());
            if let Some(clock) = clock {
                command
                    .env("LD_PRELOAD", FAKETIME)
                    .env("FAKETIME_TIMESTAMP_FILE", clock)
                    .env("FAKETIME_NO_CACHE", "1")
                    .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
            }
            command.spawn().expect("spawn a child")
        })
        .collect()
}

/// libfaketime, as Debian's `faketime` package installs it.
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The children's grants, once they are done.
fn collect(children: Vec<Child>, dir: &Path) -> Vec<Logged> {
    for mut child in children {
        assert!(
            child.wait().expect("the child ran").success(),
            "a child failed"
        );
    }
    (0..PROCESSES)
        .flat_map(|index| {
            let text = std::fs::read_to_string(dir.join(format!("grants-{index}")))
                .expect("the child's log");
            text.lines().map(from_line).collect::<Vec<_>>()
        })
        .collect()
}

/// Runs two children against `store` for `run`, calling `meanwhile` while they run, and
/// checks their grants: the limit kept (on the calls' intervals and the store's times), and at
/// least `busy` of the most the run could grant made.
fn contend(store: &str, run: Duration, busy: f64, meanwhile: impl FnOnce()) -> Vec<Logged> {
    let dir = tempfile::tempdir().expect("a directory");
    let children = spawn_children(store, run, dir.path(), None);
    meanwhile();
    let grants = collect(children, dir.path());
    check(&grants, run, busy);
    grants
}

fn check(grants: &[Logged], run: Duration, busy: f64) {
    if let Err(excess) = check_intervals(grants, LIMIT, WINDOW) {
        panic!("the calls' intervals prove an excess: {excess}");
    }
    if let Err(excess) = check_store_times(grants, LIMIT, WINDOW) {
        panic!("the store's times show an excess: {excess}");
    }
    let most = run.as_secs_f64() / WINDOW.as_secs_f64() * LIMIT as f64;
    assert!(
        grants.len() as f64 >= busy * most,
        "{} grants of at most {most:.0}",
        grants.len()
    );
}

#[test]
fn two_processes_never_exceed_the_limit_on_one_server() {
    let server = RedisServer::start();
    contend(&format!("server {}", server.url()), run_for(), 0.5, || {});
}

#[test]
fn two_processes_never_exceed_the_limit_through_sentinel() {
    let set = SentinelSet::start();
    let client = connect(&format!(
        "sentinel {} {}",
        set.master_name(),
        set.sentinel_urls().join(",")
    ));
    a_limiter_works(&client, "api");
    contend(
        &format!(
            "sentinel {} {}",
            set.master_name(),
            set.sentinel_urls().join(",")
        ),
        run_for(),
        0.5,
        || {},
    );
}

#[test]
fn two_processes_never_exceed_the_limit_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let store = format!("cluster {}", cluster.seed_urls().join(","));
    a_limiter_works(&connect(&store), "api");
    contend(&store, run_for(), 0.5, || {});
}

/// A limiter of a long window, filled: after a restart of its store, nothing is left to take.
fn fill_kept(client: &Client) -> RateLimiter {
    let kept = client
        .rate_limiter("kept", 5, Duration::from_secs(600))
        .expect("valid");
    kept.try_acquire(5).expect("reachable").expect("free");
    kept
}

fn assert_kept(kept: &RateLimiter) {
    let state = common::retried_while_unavailable(Duration::from_secs(30), || kept.inspect());
    assert_eq!((state.used, state.available), (5, 0), "{state:?}");
}

/// Grants made by calls that began after `since`: some must be, once the store is back.
fn assert_granted_after(grants: &[Logged], since: u64) {
    let after = grants.iter().filter(|grant| grant.before > since).count();
    assert!(after > 0, "no grant after the store came back");
}

#[test]
fn a_store_frozen_then_killed_and_restarted_mid_run_never_lets_the_limit_be_exceeded() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let kept = fill_kept(&connect(&format!("server {}", server.url())));
    let store = format!("server {}", server.url());
    let run = fault_run();
    let back = AtomicU64::new(0);
    let grants = contend(&store, run, 0.2, || {
        std::thread::sleep(run / 5);
        server.pause();
        std::thread::sleep(run / 10);
        server.resume();
        std::thread::sleep(run / 10);
        server.restart();
        back.store(monotonic_ns(), Ordering::SeqCst);
    });
    assert_granted_after(&grants, back.load(Ordering::SeqCst));
    assert_kept(&kept);
}

#[test]
fn the_clients_wall_clocks_stepped_back_and_forth_change_nothing() {
    assert!(
        Path::new(FAKETIME).is_file(),
        "{FAKETIME} is missing: install Debian's faketime"
    );
    let server = RedisServer::start();
    let dir = tempfile::tempdir().expect("a directory");
    let clock = dir.path().join("faketime");
    std::fs::write(&clock, "+0\n").expect("the clock file");
    let store = format!("server {}", server.url());
    let children = spawn_children(&store, run_for(), dir.path(), Some(&clock));
    let until = Instant::now() + run_for();
    for offset in ["+5m", "-5m", "+1d", "-1h", "+30s", "-2d"].iter().cycle() {
        if Instant::now() >= until {
            break;
        }
        std::fs::write(&clock, format!("{offset}\n")).expect("the clock file");
        std::thread::sleep(run_for() / 12);
    }
    let grants = collect(children, dir.path());
    check(&grants, run_for(), 0.5);
}

#[cfg(feature = "postgres")]
mod on_postgres {
    use super::*;
    use testkit::{PgServer, Shutdown};

    fn store(server: &PgServer) -> String {
        server
            .psql(&format!(
                "GRANT CREATE ON DATABASE postgres TO {}",
                PgServer::SCRAM_USER
            ))
            .expect("granted");
        format!("postgres {}", server.scram_url())
    }

    #[test]
    fn two_processes_never_exceed_the_limit_on_postgres() {
        let server = PgServer::start();
        contend(&store(&server), run_for(), 0.5, || {});
    }

    #[test]
    fn postgres_frozen_then_crashed_and_restarted_mid_run_never_lets_the_limit_be_exceeded() {
        let mut server = PgServer::start();
        let store = store(&server);
        let kept = fill_kept(&connect(&store));
        let run = fault_run();
        let back = AtomicU64::new(0);
        let grants = contend(&store, run, 0.1, || {
            std::thread::sleep(run / 5);
            server.pause();
            std::thread::sleep(run / 10);
            server.resume();
            std::thread::sleep(run / 10);
            server.stop(Shutdown::Immediate);
            server.start_again();
            back.store(monotonic_ns(), Ordering::SeqCst);
        });
        assert_granted_after(&grants, back.load(Ordering::SeqCst));
        assert_kept(&kept);
    }
}
