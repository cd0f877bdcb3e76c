//! One worker process of the sale: several buyer threads, each buying until sold out, by one
//! strategy; the process reports its tally on stdout for the coordinator.
//!
//! What it prints, one line each: `ready` once its connections are open (it then waits for `go`
//! on stdin); `frozen token=T seen=L` when the buyer with `--freeze` is about to write, which
//! then waits for `resume` on stdin while the coordinator stops the process; `late ...` when
//! the frozen buyer, resumed, has written; and last `result sold=.. sold_out=.. fenced=.. lost=..
//! retries=.. latencies_us=a,b,...`.

use super::store::{Conn, Database, Outcome, Result};
use super::Strategy;
use redis_lease::{LeaseGuard, Lock};
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// The name of the lock on the item.
pub const LOCK_NAME: &str = "flash-sale/sku-1";

/// How long a buyer waits for the lock before the worker gives up with an error.
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// What the coordinator tells a worker on its command line.
pub struct WorkerArgs {
    pub strategy: Strategy,
    pub db: Database,
    /// The lock's store: a Redis server's URL or a PostgreSQL database's.
    pub lock_at: Option<String>,
    pub threads: usize,
    pub lease: Duration,
    pub id: usize,
    /// Stop this process (SIGSTOP) once, while holding the lock, between its check of the hold
    /// and its write.
    pub freeze: bool,
    /// Whether the stock checks the fencing token (off only to show what the check prevents).
    pub fenced: bool,
}

/// One buyer's (or one process's) counts.
#[derive(Default)]
struct Tally {
    sold: u64,
    sold_out: u64,
    fenced: u64,
    lost: u64,
    retries: u64,
    latencies_us: Vec<u64>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.sold += other.sold;
        self.sold_out += other.sold_out;
        self.fenced += other.fenced;
        self.lost += other.lost;
        self.retries += other.retries;
        self.latencies_us.extend(other.latencies_us);
    }
}

/// What every buyer thread of the process shares.
struct Shared {
    args: WorkerArgs,
    lock: Option<Lock>,
    freeze_pending: AtomicBool,
}

/// Runs the worker: opens its connections, says `ready`, waits for `go`, buys, reports.
pub fn run(args: WorkerArgs) -> Result<()> {
    let lock = match args.strategy {
        Strategy::Lock => {
            let url = args
                .lock_at
                .as_deref()
                .ok_or("a worker of the lock strategy needs --lock-at")?;
            let client = super::lock_store::client(url, args.lease)?;
            Some(client.lock(LOCK_NAME)?)
        }
        Strategy::Held => Some(held_lock(&args)?),
        Strategy::Optimistic | Strategy::Pessimistic => None,
    };
    let conns = (0..args.threads)
        .map(|_| args.db.open())
        .collect::<Result<Vec<Conn>>>()?;
    say("ready")?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    if line.trim() != "go" {
        return Err(format!("expected `go` on stdin, got {line:?}").into());
    }

    let shared = Arc::new(Shared {
        freeze_pending: AtomicBool::new(args.freeze),
        args,
        lock,
    });
    let buyers: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(thread_index, conn)| {
            let shared = Arc::clone(&shared);
            let buyer = format!("p{}t{thread_index}", shared.args.id);
            thread::spawn(move || buy_until_sold_out(&shared, conn, &buyer))
        })
        .collect();
    let mut total = Tally::default();
    for buyer in buyers {
        let tally = buyer.join().map_err(|_| "a buyer thread panicked")??;
        total.add(tally);
    }
    let latencies: Vec<String> = total.latencies_us.iter().map(u64::to_string).collect();
    say(&format!(
        "result sold={} sold_out={} fenced={} lost={} retries={} latencies_us={}",
        total.sold,
        total.sold_out,
        total.fenced,
        total.lost,
        total.retries,
        latencies.join(",")
    ))
}

/// Prints one line for the coordinator, at once.
fn say(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}

/// One buyer: attempts purchases until one finds the item sold out.
fn buy_until_sold_out(shared: &Shared, mut conn: Conn, buyer: &str) -> Result<Tally> {
    let mut tally = Tally::default();
    loop {
        let start = Instant::now();
        let outcome = match shared.args.strategy {
            Strategy::Lock => {
                let lock = shared
                    .lock
                    .as_ref()
                    .ok_or("no lock for the lock strategy")?;
                buy_under_lock(shared, lock, &mut conn, buyer)?
            }
            Strategy::Optimistic => {
                let (outcome, retries) = conn.buy_optimistic(buyer)?;
                tally.retries += retries;
                outcome
            }
            Strategy::Pessimistic => conn.buy_pessimistic(buyer)?,
            Strategy::Held => {
                let lock = shared
                    .lock
                    .as_ref()
                    .ok_or("no lock for the held strategy")?;
                buy_while_held(shared, lock, buyer)?
            }
        };
        tally
            .latencies_us
            .push(u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX));
        match outcome {
            Outcome::Bought => tally.sold += 1,
            Outcome::SoldOut => {
                tally.sold_out += 1;
                return Ok(tally);
            }
            Outcome::Fenced => tally.fenced += 1,
            Outcome::Lost => tally.lost += 1,
        }
    }
}

/// One purchase under the distributed lock: take it, raise the stock's fence to the hold's token
/// and read what is left, check the hold, write the decrement and the order (fenced), release.
fn buy_under_lock(shared: &Shared, lock: &Lock, conn: &mut Conn, buyer: &str) -> Result<Outcome> {
    let (guard, token) = take(lock, buyer)?;
    let fenced = shared.args.fenced;
    let Some(seen) = conn.claim_and_read(token, fenced)? else {
        release(guard, buyer, false);
        return Ok(Outcome::Fenced);
    };
    if seen <= 0 {
        release(guard, buyer, false);
        return Ok(Outcome::SoldOut);
    }
    if guard.is_lost() {
        // Nothing written: the hold may be another owner's by now.
        guard.abandon();
        return Ok(Outcome::Lost);
    }
    // After the check, before the write.
    let froze = freeze_once(shared, token, seen)?;
    let outcome = conn.write_fenced(buyer, token, seen, fenced)?;
    if froze {
        say(&format!(
            "late token={token} tried_left={} outcome={outcome:?} fence_now={} lost={}",
            seen - 1,
            conn.fence()?,
            guard.is_lost()
        ))?;
    }
    release(guard, buyer, froze);
    Ok(outcome)
}

/// The lock, waited for at most [`LOCK_WAIT`], and its fencing token.
fn take(lock: &Lock, buyer: &str) -> Result<(LeaseGuard, i64)> {
    let guard = lock
        .try_lock_for(LOCK_WAIT)?
        .ok_or_else(|| format!("{buyer} did not get the lock within {LOCK_WAIT:?}"))?;
    let token = guard
        .fencing_token()
        .ok_or("this deployment gives no fencing tokens")?;
    let token = i64::try_from(token).map_err(|_| format!("token {token} overflows"))?;
    Ok((guard, token))
}

/// The pause a fencing token is for, taken by the process's first buyer only: whether this
/// buyer froze. The coordinator stops this process (SIGSTOP) when it reads the `frozen` line,
/// and lets it go on (SIGCONT, then `resume`) once a newer holder has written: until then the
/// buyer waits here, so that it cannot write before it is stopped.
fn freeze_once(shared: &Shared, token: i64, seen: i64) -> Result<bool> {
    let froze = shared.freeze_pending.swap(false, Ordering::SeqCst);
    if froze {
        say(&format!("frozen token={token} seen={seen}"))?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        if line.trim() != "resume" {
            return Err(format!("expected `resume` on stdin, got {line:?}").into());
        }
    }
    Ok(froze)
}

/// The lock of a held sale: in the stock's own PostgreSQL.
fn held_lock(args: &WorkerArgs) -> Result<Lock> {
    let Database::Postgres(url) = &args.db else {
        return Err("the held strategy keeps its lock in the stock's PostgreSQL".into());
    };
    Ok(super::lock_store::client(url, args.lease)?.lock(LOCK_NAME)?)
}

/// One purchase of a held sale: take the lock, write while the hold holds, release.
fn buy_while_held(shared: &Shared, lock: &Lock, buyer: &str) -> Result<Outcome> {
    let (guard, token) = take(lock, buyer)?;
    let froze = freeze_once(shared, token, 0)?;
    let outcome = super::held::buy(&guard, buyer, token)?;
    if froze {
        say(&format!(
            "late token={token} outcome={outcome:?} lost={}",
            guard.is_lost()
        ))?;
    }
    release(guard, buyer, froze);
    Ok(outcome)
}

/// Releases a hold. A release refused because the lease ran out (a frozen or starved holder) is
/// reported on stderr and not an error: the store's fence is what keeps such a holder out.
fn release(guard: LeaseGuard, buyer: &str, froze: bool) {
    if let Err(e) = guard.unlock() {
        if froze {
            let _ = say(&format!("late release refused: {e}"));
        } else {
            eprintln!("flash_sale: {buyer}: release failed: {e}");
        }
    }
}
