//! One client process of a fault scenario. Each of its threads takes the lock again and again
//! until its time is up, and under the lock writes to the fenced store and increments the
//! unfenced counter, checking between steps that its hold is not lost. The threads share one
//! `lease` client (so they also queue locally and hand the lock to each other); each has its own
//! owner id and writes what it does to its own history file, `HISTORY-<thread>.jsonl`, which ends
//! with its run done, or with the error it quit on.
//!
//! `fault_client CLIENT HISTORY RESOURCE_URL MODE LEASE_MS RUN_MS THREADS URL...`
//!
//! `MODE` is `single` (one URL), `redlock` (the masters' URLs), `cluster` (seed URLs),
//! `sentinel` or `sentinel-acks` (the name the Sentinels know the primary by, then the Sentinels'
//! URLs; with `-acks`, every acquisition, renewal and release waits for one replica),
//! `zookeeper` (the servers' `host:port`s; the lease is the session timeout), or `postgres` (the
//! URL every call goes to, a server or a pooler, then the URL of the listening connection).
//!
//! `FAULT_PRIMITIVE` says what the threads take: `lock` (the default), `semaphore:N` (one of N
//! permits; no write or increment under it, which N holders at once would race on), or `rw` (a
//! read-write lock: the write side one cycle in three, with the writes and increments, the read
//! side in the others, with neither), or `election` (each cycle a campaign, its term the token
//! of its writes; each process also observes the election, in `HISTORY-obs.jsonl`).

#![allow(clippy::print_stderr, clippy::print_stdout, missing_docs)]

use crossbeam_channel::RecvTimeoutError;
use faults::clock::{now_ns, Stamp};
use faults::history::{Event, Recorder};
use faults::primitive::Primitive;
use faults::resource;
use redis_lease::{Leadership, LeaseGuard};
use std::path::Path;
use std::time::{Duration, Instant};

/// Steps of work per hold, and the pause before each write. One hold in `LONG_EVERY` lasts one
/// and a half leases, so that it needs renewing.
const STEPS: usize = 3;
const STEP_PAUSE: Duration = Duration::from_millis(5);
const LONG_EVERY: u64 = 20;
const WAIT: Duration = Duration::from_secs(1);
/// How often a long step looks whether a renewal moved the hold's deadline.
const LOOK: Duration = Duration::from_millis(50);
/// How long a call to the resource server (never faulted) may take.
const RESOURCE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the threads of the process share: one client, of one server, of RedLock's masters, of
/// a cluster, of a Sentinel-managed primary, of a ZooKeeper ensemble or of a PostgreSQL server.
fn open(mode: &str, lease: Duration, urls: &[String]) -> redis_lease::Result<redis_lease::Client> {
    match mode {
        "sentinel" | "sentinel-acks" => {
            let (master_name, sentinels) = urls.split_first().ok_or_else(|| {
                redis_lease::Error::InvalidArgument("no Sentinel master name".into())
            })?;
            let builder = redis_lease::Client::sentinel(master_name, sentinels.iter().cloned())
                .default_lease(lease)
                .command_timeout(lease / 2)
                .connect_timeout(lease / 2);
            match mode {
                // A quarter lease for the replica's acknowledgement, within the command timeout.
                "sentinel-acks" => builder.replica_acks(1, lease / 4),
                _ => builder,
            }
            .build()
        }
        "single" => redis_lease::Client::builder(urls[0].as_str())
            .default_lease(lease)
            .command_timeout(lease / 2)
            .connect_timeout(lease / 2)
            .build(),
        "cluster" => redis_lease::Client::cluster(urls.iter().cloned())
            .default_lease(lease)
            .command_timeout(lease / 2)
            .connect_timeout(lease / 2)
            .build(),
        // The default lease is the session timeout the client asks for.
        "zookeeper" => redis_lease::Client::zookeeper(urls.iter().cloned())
            .default_lease(lease)
            .command_timeout(lease / 2)
            .connect_timeout(lease / 2)
            .build(),
        // Calls to the first URL (the server, a proxy or a pooler), `LISTEN` on the second.
        "postgres" => {
            let [calls, listen] = urls else {
                return Err(redis_lease::Error::InvalidArgument(
                    "postgres takes the calls' URL and the listening connection's".into(),
                ));
            };
            redis_lease::Client::postgres(calls.as_str())
                .postgres_listen_url(listen.as_str())
                .default_lease(lease)
                .command_timeout(lease / 2)
                .connect_timeout(lease / 2)
                .build()
        }
        _ => redis_lease::Client::redlock(urls.iter().cloned())
            .default_lease(lease)
            .command_timeout(lease / 10)
            .build(),
    }
}

/// What a cycle holds: a lock's (a permit's, a side's) hold, or an election's term.
enum Held {
    Guard(LeaseGuard),
    Leader(Leadership),
}

impl Held {
    /// The fencing token (an election's term); RedLock has none.
    fn fencing_token(&self) -> Option<u64> {
        match self {
            Held::Guard(guard) => guard.fencing_token(),
            Held::Leader(leadership) => Some(leadership.term()),
        }
    }

    fn valid_until(&self) -> Instant {
        match self {
            Held::Guard(guard) => guard.valid_until(),
            Held::Leader(leadership) => leadership.valid_until(),
        }
    }

    fn lost(&self) -> Option<redis_lease::Lost> {
        match self {
            Held::Guard(guard) => guard.lost(),
            Held::Leader(leadership) => leadership.lost(),
        }
    }

    fn is_lost(&self) -> bool {
        match self {
            Held::Guard(guard) => guard.is_lost(),
            Held::Leader(leadership) => leadership.is_lost(),
        }
    }

    fn lost_signal(&self) -> redis_lease::LostSignal {
        match self {
            Held::Guard(guard) => guard.lost_signal(),
            Held::Leader(leadership) => leadership.lost_signal(),
        }
    }

    fn abandon(self) {
        match self {
            Held::Guard(guard) => guard.abandon(),
            Held::Leader(leadership) => leadership.abandon(),
        }
    }

    /// Releases the hold, or resigns the term.
    fn unlock(self) -> redis_lease::Result<()> {
        match self {
            Held::Guard(guard) => guard.unlock(),
            Held::Leader(mut leadership) => leadership.resign(),
        }
    }
}

/// The hold's fencing token; RedLock has none, and records 0.
fn token(held: &Held) -> u64 {
    held.fencing_token().unwrap_or(0)
}

/// How the hold was lost, if it was: the watchdog's reason, or past its deadline.
fn loss(held: &Held) -> Option<(String, Instant)> {
    match held.lost() {
        Some(lost) => Some((format!("{:?}", lost.reason), lost.valid_until)),
        None if held.is_lost() => Some(("PastDeadline".into(), held.valid_until())),
        None => None,
    }
}

/// Records each change the election's observer reports, until `end`.
fn observe(
    client: &str,
    path: &str,
    shared: &redis_lease::Client,
    end: Instant,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut recorder = Recorder::create(Path::new(path))?;
    // The first read may meet a fault: tried again until it answers.
    let observer = loop {
        match shared.election("jobs")?.observe() {
            Ok(observer) => break observer,
            Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(50)),
            Err(error) => return Err(error.into()),
        }
    };
    loop {
        match observer
            .changes()
            .recv_timeout(end.saturating_duration_since(Instant::now()))
        {
            Ok(change) => recorder.record(&Event::Observed {
                t: now_ns(),
                client: client.to_owned(),
                term: change.map(|leader| leader.term),
            }),
            Err(RecvTimeoutError::Timeout) => return Ok(()),
            Err(RecvTimeoutError::Disconnected) => {
                return Err("the observer stopped before its time".into())
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 8 {
        eprintln!(
            "usage: fault_client CLIENT HISTORY RESOURCE_URL single|redlock|cluster|sentinel|sentinel-acks|zookeeper|postgres LEASE_MS RUN_MS THREADS URL..."
        );
        std::process::exit(64);
    }
    let (client, history, resource_url, mode) = (&args[0], &args[1], &args[2], &args[3]);
    let lease = Duration::from_millis(args[4].parse().unwrap_or(500));
    let run_for = Duration::from_millis(args[5].parse().unwrap_or(10_000));
    let threads: usize = args[6].parse().unwrap_or(1);
    // A client outliving the suite (stopped with Ctrl-C, or failed) would go on contending.
    if let Err(error) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL) {
        eprintln!("fault_client {client}: cannot follow the suite's exit: {error}");
    }
    let urls = &args[7..];
    let shared = match open(mode, lease, urls) {
        Ok(shared) => shared,
        Err(error) => {
            eprintln!("fault_client {client}: {error}");
            std::process::exit(1);
        }
    };
    let watching = Primitive::parse(&std::env::var("FAULT_PRIMITIVE").unwrap_or_default())
        == Some(Primitive::Election);
    let observer = watching.then(|| {
        let (name, path, shared) = (
            client.clone(),
            format!("{history}-obs.jsonl"),
            shared.clone(),
        );
        let end = Instant::now() + run_for;
        std::thread::spawn(move || {
            observe(&name, &path, &shared, end)
                .map_err(|error| format!("{name} observing: {error}"))
        })
    });
    let workers: Vec<_> = (0..threads)
        .map(|k| {
            let name = format!("{client}.{k}");
            let path = format!("{history}-{k}.jsonl");
            let (shared, resource_url) = (shared.clone(), resource_url.clone());
            std::thread::spawn(move || {
                let mut recorder = Recorder::create(Path::new(&path))
                    .map_err(|error| format!("cannot write {path}: {error}"))?;
                let ran = run(&name, &mut recorder, &resource_url, &shared, lease, run_for);
                if let Err(error) = &ran {
                    recorder.record(&Event::Quit {
                        t: now_ns(),
                        client: name.clone(),
                        error: error.to_string(),
                    });
                }
                ran.map_err(|error| format!("{name}: {error}"))
            })
        })
        .collect();
    let mut failed = false;
    for worker in workers.into_iter().chain(observer) {
        let outcome = worker
            .join()
            .unwrap_or_else(|_| Err("a thread panicked".into()));
        if let Err(error) = outcome {
            eprintln!("fault_client {error}");
            failed = true;
        }
    }
    if failed {
        std::process::exit(1);
    }
}

fn run(
    name: &str,
    recorder: &mut Recorder,
    resource_url: &str,
    shared: &redis_lease::Client,
    lease: Duration,
    run_for: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let stamp = Stamp::new();
    let mut store = resource::Connection::open(resource_url, RESOURCE_TIMEOUT)?;
    let primitive = Primitive::parse(&std::env::var("FAULT_PRIMITIVE").unwrap_or_default())
        .ok_or("FAULT_PRIMITIVE names no primitive")?;
    let lock = shared.lock("jobs")?;
    let election = (primitive == Primitive::Election)
        .then(|| shared.election("jobs"))
        .transpose()?;
    let (permit, read, write) = match primitive {
        Primitive::Lock | Primitive::Election => (None, None, None),
        Primitive::Semaphore(permits) => (
            Some(shared.semaphore("jobs", permits)?.taking(1)?),
            None,
            None,
        ),
        Primitive::ReadWrite => {
            let rw = shared.read_write_lock("jobs")?;
            (
                None,
                Some(rw.read_lock().clone()),
                Some(rw.write_lock().clone()),
            )
        }
    };
    let owner = lock.owner().into_owned();
    let name = name.to_owned();
    recorder.record(&Event::Start {
        t: now_ns(),
        client: name.clone(),
        owner,
        pid: std::process::id(),
    });
    let end = Instant::now() + run_for;
    let mut cycle = 0u64;
    while Instant::now() < end {
        cycle += 1;
        let step_pause = if cycle.is_multiple_of(LONG_EVERY) {
            lease / 2
        } else {
            STEP_PAUSE
        };
        recorder.record(&Event::AcquireInvoke {
            t: now_ns(),
            client: name.clone(),
        });
        // What this cycle takes, and whether it writes under it.
        let (taken, side) = match (&permit, &read, &write) {
            (Some(permit), _, _) => (permit, "permit"),
            (_, Some(_), Some(write)) if cycle.is_multiple_of(3) => (write, "write"),
            (_, Some(read), _) => (read, "read"),
            _ => (&lock, ""),
        };
        let writes = primitive.exclusive(side);
        let acquired = match &election {
            Some(election) => election
                .try_campaign_for(WAIT, name.as_str())
                .map(|led| led.map(Held::Leader)),
            None => taken.try_lock_for(WAIT).map(|held| held.map(Held::Guard)),
        };
        let held = match acquired {
            Ok(Some(held)) => held,
            Ok(None) => {
                recorder.record(&Event::AcquireFail {
                    t: now_ns(),
                    client: name.clone(),
                });
                continue;
            }
            Err(error) => {
                recorder.record(&Event::AcquireError {
                    t: now_ns(),
                    client: name.clone(),
                    error: error.to_string(),
                    retryable: error.is_retryable(),
                });
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        recorder.record(&Event::AcquireOk {
            t: now_ns(),
            client: name.clone(),
            token: token(&held),
            valid_until: stamp.of(held.valid_until()),
            wall_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as u64),
            side: side.to_owned(),
        });
        let mut lost = None;
        let told = held.lost_signal();
        let mut deadline = held.valid_until();
        for _ in 0..STEPS {
            if let Some(found) = loss(&held) {
                lost = Some(found);
                break;
            }
            // The work between the check and the write: a pause here (a stop, a long
            // collection) is what fencing tokens are for. The watchdog may speak meanwhile,
            // and renewals move the deadline, which is looked at every `LOOK`.
            let until = Instant::now() + step_pause;
            let news = loop {
                let left = until.saturating_duration_since(Instant::now());
                let news = told.recv_timeout(left.min(LOOK)).ok();
                if held.valid_until() > deadline {
                    deadline = held.valid_until();
                    recorder.record(&Event::Renewed {
                        t: now_ns(),
                        client: name.clone(),
                        valid_until: stamp.of(deadline),
                    });
                }
                if news.is_some() || left <= LOOK {
                    break news;
                }
            };
            if let Some(news) = news {
                lost = Some((format!("{:?}", news.reason), news.valid_until));
                break;
            }
            if !writes {
                continue;
            }
            if held.fencing_token().is_some() {
                let accepted = resource::fenced_write(&mut store, token(&held), &name)?;
                recorder.record(&Event::Write {
                    t: now_ns(),
                    client: name.clone(),
                    token: token(&held),
                    accepted,
                });
            }
            resource::increment(&mut store)?;
            recorder.record(&Event::Increment {
                t: now_ns(),
                client: name.clone(),
            });
        }
        match lost.or_else(|| loss(&held)) {
            Some((reason, valid_until)) => {
                recorder.record(&Event::Lost {
                    t: now_ns(),
                    client: name.clone(),
                    reason,
                    valid_until: stamp.of(valid_until),
                });
                held.abandon();
            }
            None => {
                recorder.record(&Event::ReleaseInvoke {
                    t: now_ns(),
                    client: name.clone(),
                });
                let ok = held.unlock().is_ok();
                recorder.record(&Event::ReleaseDone {
                    t: now_ns(),
                    client: name.clone(),
                    ok,
                });
            }
        }
    }
    recorder.record(&Event::Done {
        t: now_ns(),
        client: name,
    });
    Ok(())
}
