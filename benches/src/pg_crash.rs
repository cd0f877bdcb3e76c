//! What a crash of the server does to the PostgreSQL store's holds and tokens, measured: 4
//! threads of one client take and release locks on 8 names each in a loop, and every 8th turn
//! keep a hold on a name of its own; meanwhile the server is crashed (an immediate shutdown,
//! SIGQUIT: no checkpoint, the WAL replayed at the next start; or SIGKILL of the postmaster alone:
//! its processes carry on until they notice) and started again at once. Every acquisition and
//! release the client acknowledged is recorded with its token and time. After the restart: per
//! name, whether a token acknowledged after the crash went back to or below one acknowledged
//! before it, which acknowledged holds are still rows of the store, and which released ones came
//! back; and, while the load ran, how much WAL was written and not yet flushed. Run on the store
//! as it ships and on the asynchronous copy (`pg_durability.rs`).

use crate::pg_durability::{client, install, ASYNC, SHIPPED};
use crate::pg_server::{self, connect, soon};
use parking_lot::Mutex;
use postgres_blocking::Connection;
use redis_lease::{Client, LeaseGuard};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use testkit::{PgServer, Shutdown};

/// How the server is crashed.
#[derive(Clone, Copy, Debug)]
pub enum Crash {
    /// `pg_ctl stop -m immediate`: SIGQUIT to the postmaster, every process exits at once.
    Immediate,
    /// SIGKILL to the postmaster alone.
    KillPostmaster,
}

/// One acquisition the client acknowledged.
#[derive(Clone, Debug)]
struct Acked {
    name: String,
    token: u64,
    at: Instant,
}

/// What the load recorded.
#[derive(Default)]
struct Record {
    acked: Vec<Acked>,
    /// Holds kept, with their acknowledgement.
    kept: Vec<(Acked, LeaseGuard)>,
    /// Holds released, with the release's acknowledgement.
    released: Vec<Acked>,
    failed_calls: u64,
}

/// What one crash trial found.
pub struct Trial {
    /// Whether the store's functions committed synchronously (as it ships).
    pub synchronous: bool,
    pub how: Crash,
    /// Acquisitions acknowledged, all and before the crash.
    pub acked: usize,
    pub acked_before: usize,
    /// Names whose first token acknowledged after the crash was not above every token
    /// acknowledged before it.
    pub tokens_back: usize,
    /// Holds kept that were acknowledged before the crash, and of them those still rows after.
    pub kept: usize,
    pub kept_rows: usize,
    /// Holds whose release was acknowledged before the crash, and of them those back as rows
    /// after it (they lapse with their lease).
    pub released: usize,
    pub released_back: usize,
    /// How long before the crash the earliest acknowledgement that was lost (a token handed out
    /// again, a kept hold gone) came.
    pub lost_window: Option<Duration>,
    /// From the crash to the server answering again.
    pub down: Duration,
    pub failed_calls: u64,
    /// WAL written but not yet flushed to disk while the load ran (sampled every 10 ms), as the
    /// milliseconds of the load's WAL it came to: mean and largest. Under synchronous commits
    /// none of it is acknowledged; under asynchronous ones it is what a crash of the machine
    /// (not of the server alone: the kernel keeps what the server wrote) may take back.
    pub unflushed_ms: (f64, f64),
}

/// `crash`: the crash trials, each crash after `before` of load, `rounds` of each kind.
pub fn crash(before: Duration, rounds: usize) -> Vec<Trial> {
    let mut trials = Vec::new();
    for schema in [SHIPPED, ASYNC] {
        for how in [Crash::Immediate, Crash::KillPostmaster] {
            for _ in 0..rounds {
                trials.push(trial(schema, how, before));
            }
        }
    }
    trials
}

/// One crash trial on a server of its own.
fn trial(schema: &str, how: Crash, before: Duration) -> Trial {
    let mut server = pg_server::start(&[]);
    let url = server.url();
    let mut conn = connect(&url);
    install(&url, &mut conn, schema);
    drop(conn);
    let client = client(&url, schema);
    let record = Arc::new(Mutex::new(Record::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let (client, record, stop) = (client.clone(), record.clone(), stop.clone());
            thread::spawn(move || load(t, &client, &record, &stop))
        })
        .collect();
    let unflushed = unflushed_wal(&url, before);
    let crashed = Instant::now();
    crash_server(&mut server, how);
    let down = crashed.elapsed();
    // The holds as the restarted server has them, before the load takes any more.
    let mut conn = connect(&url);
    let rows: Vec<(String, u64)> = conn
        .query(
            &format!("SELECT key, token FROM {schema}.holds WHERE expires > clock_timestamp()"),
            &[],
            soon(),
        )
        .expect("the holds")
        .iter()
        .map(|row| {
            (
                row.get("key").expect("key"),
                row.get("token").expect("token"),
            )
        })
        .collect();
    // The load goes on a while after the restart, on the names it used before.
    thread::sleep(before.max(Duration::from_secs(1)));
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("no panic");
    }
    let record = std::mem::take(&mut *record.lock());
    let row_of = |acked: &Acked| {
        let key = format!("{{{}}}", acked.name);
        rows.iter()
            .any(|(k, token)| *k == key && *token == acked.token)
    };
    // Holds whose release was acknowledged before the crash, back as rows after it.
    let released_back = record
        .released
        .iter()
        .filter(|released| released.at < crashed && row_of(released))
        .count();
    // Per name: the highest token acknowledged before the crash (and when), and the first
    // acknowledged after it, which must be higher.
    let mut before_crash: HashMap<&str, (u64, Instant)> = HashMap::new();
    let mut after_crash: HashMap<&str, u64> = HashMap::new();
    let mut ordered: Vec<&Acked> = record.acked.iter().collect();
    ordered.sort_by_key(|acked| acked.at);
    for acked in &ordered {
        if acked.at < crashed {
            before_crash.insert(&acked.name, (acked.token, acked.at));
        } else {
            after_crash.entry(&acked.name).or_insert(acked.token);
        }
    }
    let mut lost_at: Vec<Instant> = Vec::new();
    let mut tokens_back = 0;
    for (name, first_after) in &after_crash {
        if let Some(&(highest, _)) = before_crash.get(name) {
            if *first_after <= highest {
                tokens_back += 1;
                // The earliest acknowledgement whose token was handed out again.
                if let Some(acked) = ordered.iter().find(|acked| {
                    acked.name == *name && acked.at < crashed && acked.token >= *first_after
                }) {
                    lost_at.push(acked.at);
                }
            }
        }
    }
    let kept_before: Vec<&Acked> = record
        .kept
        .iter()
        .map(|(acked, _)| acked)
        .filter(|acked| acked.at < crashed)
        .collect();
    let mut kept_rows = 0;
    for acked in &kept_before {
        let key = format!("{{{}}}", acked.name);
        if rows
            .iter()
            .any(|(k, token)| *k == key && *token == acked.token)
        {
            kept_rows += 1;
        } else {
            lost_at.push(acked.at);
        }
    }
    let trial = Trial {
        synchronous: schema == SHIPPED,
        how,
        acked: ordered.len(),
        acked_before: ordered.iter().filter(|acked| acked.at < crashed).count(),
        tokens_back,
        kept: kept_before.len(),
        kept_rows,
        released: record
            .released
            .iter()
            .filter(|released| released.at < crashed)
            .count(),
        released_back,
        lost_window: lost_at.iter().min().map(|at| crashed.duration_since(*at)),
        down,
        failed_calls: record.failed_calls,
        unflushed_ms: unflushed,
    };
    drop(record);
    drop(client);
    drop(server);
    trial
}

/// A load thread: locks on 8 names in turn, each taken and released, and every 8th turn a
/// hold kept on a name of its own; every acquisition acknowledged is recorded.
fn load(t: usize, client: &Client, record: &Mutex<Record>, stop: &AtomicBool) {
    let mut turn = 0u64;
    while !stop.load(Ordering::Relaxed) {
        turn += 1;
        let keep = turn.is_multiple_of(8);
        let name = if keep {
            format!("kept:{t}:{turn}")
        } else {
            format!("cycled:{t}:{}", turn % 8)
        };
        let lock = client.lock(&name).expect("valid name");
        match lock.try_lock_for(Duration::from_millis(500)) {
            Ok(Some(guard)) => {
                let acked = Acked {
                    name,
                    token: guard.fencing_token().expect("a token"),
                    at: Instant::now(),
                };
                let mut recorded = record.lock();
                recorded.acked.push(acked.clone());
                if keep {
                    recorded.kept.push((acked, guard));
                } else {
                    drop(recorded);
                    match guard.unlock() {
                        Ok(()) => record.lock().released.push(Acked {
                            at: Instant::now(),
                            ..acked
                        }),
                        Err(_) => record.lock().failed_calls += 1,
                    }
                }
            }
            Ok(None) => {}
            Err(_) => {
                record.lock().failed_calls += 1;
                thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Crashes `server` as `how` says and starts it again, once every process of the old one is
/// gone (a backend of a killed postmaster lives until it notices).
fn crash_server(server: &mut PgServer, how: Crash) {
    match how {
        Crash::Immediate => server.stop(Shutdown::Immediate),
        Crash::KillPostmaster => {
            let pid = server.pid().expect("a running server");
            let children = children(pid);
            signal("-KILL", pid);
            // Reaps the postmaster (the signal testkit sends a dead process is lost).
            server.stop(Shutdown::Immediate);
            let until = Instant::now() + Duration::from_secs(30);
            while children.iter().any(|child| alive(*child)) && Instant::now() < until {
                thread::sleep(Duration::from_millis(5));
            }
        }
    }
    server.start_again();
}

/// Sends `signal` (such as `-KILL`) to `pid`.
fn signal(signal: &str, pid: u32) {
    let _ = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
}

/// Whether process `pid` still runs (a zombie does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let child: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            let after = &stat[stat.rfind(')')? + 1..];
            let parent: u32 = after.split_whitespace().nth(1)?.parse().ok()?;
            (parent == pid).then_some(child)
        })
        .collect()
}

/// Samples, every 10 ms for `during`, how much WAL the server has written but not flushed, and
/// returns its mean and largest as milliseconds of the WAL the server wrote meanwhile.
fn unflushed_wal(url: &str, during: Duration) -> (f64, f64) {
    let mut conn = connect(url);
    let lsn = "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::float8, \
               (pg_current_wal_insert_lsn() - pg_current_wal_flush_lsn())::float8";
    let read = |conn: &mut Connection| {
        let row = conn
            .query_one(lsn, &[], soon())
            .expect("the WAL's positions");
        (
            row.get::<f64>(0).expect("a position"),
            row.get::<f64>(1).expect("a gap"),
        )
    };
    let (first, _) = read(&mut conn);
    let began = Instant::now();
    let mut gaps = Vec::new();
    while began.elapsed() < during {
        gaps.push(read(&mut conn).1);
        thread::sleep(Duration::from_millis(10));
    }
    let (last, _) = read(&mut conn);
    let per_ms = (last - first) / began.elapsed().as_secs_f64() / 1e3;
    let mean = gaps.iter().sum::<f64>() / gaps.len().max(1) as f64;
    let max = gaps.iter().copied().fold(0.0, f64::max);
    (mean / per_ms.max(1.0), max / per_ms.max(1.0))
}
