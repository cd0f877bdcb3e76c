//! The floors the PostgreSQL store is measured against: the server's own session advisory locks
//! (`pg_advisory_lock` + `pg_advisory_unlock`, each one statement and one round trip, a
//! connection per thread), run the way the store's figures run, and the timed loop both share.

use crate::child::{self, ChildProcess};
use crate::handoff::wall_micros;
use crate::pg_server::{advisory_key, connect, soon};
use postgres_blocking::Connection;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};
use testkit::Lcg;

/// What a timed loop made: its rate over the measured window, and every operation counted from
/// the start (warm-up included), which the server's counters are divided by.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    pub per_s: f64,
    pub total: u64,
}

/// Runs `op` in `threads` threads, each on the state `setup` gives it, for a warm-up then `run`;
/// the rate is over `run` alone. `op` is given the thread's random numbers.
pub fn timed<S: Send + 'static>(
    threads: usize,
    run: Duration,
    setup: impl Fn(usize) -> S,
    op: fn(&mut S, &mut Lcg),
) -> Measured {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|n| {
            let mut state = setup(n);
            let (stop, done, start) = (stop.clone(), done.clone(), start.clone());
            thread::spawn(move || {
                let mut rng = Lcg(n as u64 + 1);
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    op(&mut state, &mut rng);
                    done.fetch_add(1, Ordering::Relaxed);
                }
                drop(state);
            })
        })
        .collect();
    start.wait();
    thread::sleep((run / 10).min(Duration::from_millis(500)));
    let (first, began) = (done.load(Ordering::Relaxed), Instant::now());
    thread::sleep(run);
    let (last, elapsed) = (done.load(Ordering::Relaxed), began.elapsed());
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("no panic");
    }
    Measured {
        per_s: (last - first) as f64 / elapsed.as_secs_f64(),
        total: done.load(Ordering::Relaxed),
    }
}

/// `pg_advisory_lock` on `key`, which waits in the server while another session holds it.
pub fn advisory_lock(conn: &mut Connection, key: &str) {
    conn.execute("SELECT pg_advisory_lock($1::bigint)", &[Some(key)], soon())
        .expect("advisory lock");
}

/// `pg_advisory_unlock` on `key`.
pub fn advisory_unlock(conn: &mut Connection, key: &str) {
    conn.execute(
        "SELECT pg_advisory_unlock($1::bigint)",
        &[Some(key)],
        soon(),
    )
    .expect("advisory unlock");
}

/// Advisory lock + unlock pairs on one key, `threads` threads with a connection each.
pub fn one_key(url: &str, threads: usize, run: Duration) -> Measured {
    let key = advisory_key("floor:one");
    let url = url.to_owned();
    timed(
        threads,
        run,
        move |_| (connect(&url), key.clone()),
        |(conn, key), _| {
            advisory_lock(conn, key);
            advisory_unlock(conn, key);
        },
    )
}

/// Advisory lock + unlock pairs on random names among `names`, `threads` threads with a
/// connection each.
pub fn many_names(url: &str, threads: usize, names: u64, run: Duration) -> Measured {
    let url = url.to_owned();
    timed(
        threads,
        run,
        move |_| (connect(&url), names),
        |(conn, names), rng| {
            let key = advisory_key(&format!("name:{}", rng.below(*names)));
            advisory_lock(conn, &key);
            advisory_unlock(conn, &key);
        },
    )
}

/// The hand-off's key.
fn handoff_key() -> String {
    advisory_key("floor:handoff")
}

/// The advisory hand-off across two processes: this process's connection takes the lock, the
/// waiter (this binary run again as `child-advisory-waiter URL`, with its own connection) is
/// told to wait for it, and after `hold` the lock is released; the samples are from the release
/// to the waiter holding it, in ms.
pub fn handoff(url: &str, rounds: usize, hold: Duration) -> Vec<f64> {
    let mut conn = connect(url);
    let key = handoff_key();
    let mut waiter = ChildProcess::start("child-advisory-waiter", &[url]);
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        advisory_lock(&mut conn, &key);
        waiter.say("go");
        thread::sleep(hold);
        let released = wall_micros();
        advisory_unlock(&mut conn, &key);
        let acquired: u128 = waiter.line().trim().parse().expect("a timestamp");
        samples.push(acquired.saturating_sub(released) as f64 / 1e3);
    }
    waiter.finish();
    samples
}

/// The waiter's side of [`handoff`]: on each "go", waits in `pg_advisory_lock`, stamps the
/// moment it holds, releases, and reports the stamp.
pub fn serve_advisory_waiter(url: &str) {
    let mut conn = connect(url);
    let key = handoff_key();
    child::ready();
    let mut out = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
        advisory_lock(&mut conn, &key);
        let acquired = wall_micros();
        advisory_unlock(&mut conn, &key);
        writeln!(out, "{acquired}").expect("parent alive");
        out.flush().expect("parent alive");
    }
}
