//! One sale, run by the coordinator: a fresh stock, the worker processes started, told `go`
//! together (or, for the frozen-holder scenario, the freezing worker first), their tallies
//! gathered, the stock audited.

use super::store::{Audit, Database, Result};
use super::Strategy;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

/// How long the coordinator waits for any step of a worker (ready, frozen, its result).
const STEP_TIMEOUT: Duration = Duration::from_secs(120);

/// What every sale of one invocation shares.
pub struct Plan {
    pub exe: PathBuf,
    pub dir: PathBuf,
    /// The PostgreSQL database to sell from, if not an SQLite file per sale in `dir`.
    pub postgres: Option<String>,
    /// Where the lock lives (a Redis server's or a PostgreSQL database's URL), if a sale takes
    /// it.
    pub lock_at: Option<String>,
    pub stock: i64,
    pub procs: usize,
    pub threads: usize,
    pub lease: Duration,
    pub fenced: bool,
}

/// What one sale did.
pub struct Report {
    pub label: String,
    pub audit: Audit,
    pub sold: u64,
    pub sold_out: u64,
    pub fenced: u64,
    pub lost: u64,
    pub retries: u64,
    pub elapsed: Duration,
    /// Every purchase attempt's latency, sorted.
    pub latencies_us: Vec<u64>,
}

impl Report {
    /// Items sold per second of the sale, from `go` to the last worker's result.
    pub fn throughput(&self) -> f64 {
        self.sold as f64 / self.elapsed.as_secs_f64()
    }

    /// The `q` quantile of the attempts' latencies, in milliseconds.
    pub fn latency_ms(&self, q: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return 0.0;
        }
        let rank = (q * self.latencies_us.len() as f64).ceil() as usize;
        let index = rank.clamp(1, self.latencies_us.len()) - 1;
        self.latencies_us[index] as f64 / 1000.0
    }
}

/// A line from a worker, or the end of its output.
enum Event {
    Line(usize, String),
    Closed(usize),
}

/// The running workers of one sale and what they have said so far.
struct Workers {
    children: Vec<Child>,
    stdins: Vec<ChildStdin>,
    events: Receiver<Event>,
    ready: usize,
    frozen: Option<i64>,
    results: HashMap<usize, String>,
    closed: usize,
    started: Instant,
}

impl Workers {
    fn start(plan: &Plan, strategy: Strategy, db: &Database, freeze: bool) -> Result<Workers> {
        let (tx, events) = mpsc::channel();
        let mut children = Vec::new();
        let mut stdins = Vec::new();
        for id in 0..plan.procs {
            let mut command = Command::new(&plan.exe);
            command
                .arg("worker")
                .args(["--strategy", strategy.name()])
                .args(["--db", &db.arg()])
                .args(["--threads", &plan.threads.to_string()])
                .args(["--lease-ms", &plan.lease.as_millis().to_string()])
                .args(["--id", &id.to_string()]);
            if let Some(url) = &plan.lock_at {
                command.args(["--lock-at", url]);
            }
            if freeze && id == 0 {
                command.arg("--freeze");
            }
            if !plan.fenced {
                command.arg("--unfenced");
            }
            let mut child = command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| format!("cannot start worker {id}: {e}"))?;
            let stdout = child.stdout.take().ok_or("worker without stdout")?;
            let stdin = child.stdin.take().ok_or("worker without stdin")?;
            forward(id, stdout, tx.clone());
            children.push(child);
            stdins.push(stdin);
        }
        Ok(Workers {
            children,
            stdins,
            events,
            ready: 0,
            frozen: None,
            results: HashMap::new(),
            closed: 0,
            started: Instant::now(),
        })
    }

    /// Takes in what the workers say until `done` holds, or fails after [`STEP_TIMEOUT`].
    fn until(&mut self, what: &str, done: impl Fn(&Workers) -> bool) -> Result<()> {
        let deadline = Instant::now() + STEP_TIMEOUT;
        while !done(self) {
            if self.closed == self.children.len() {
                return Err(format!("the workers exited before {what}").into());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let heard = self
                .pump(left)
                .map_err(|e| format!("waiting for {what}: {e}"))?;
            if !heard {
                return Err(format!("timed out waiting for {what}").into());
            }
        }
        Ok(())
    }

    /// Takes in one event, waiting at most `wait`: `false` if none came.
    fn pump(&mut self, wait: Duration) -> Result<bool> {
        match self.events.recv_timeout(wait) {
            Ok(Event::Line(id, line)) => self.note(id, line).map(|()| true),
            Ok(Event::Closed(id)) => {
                self.closed += 1;
                if self.results.contains_key(&id) {
                    Ok(true)
                } else {
                    Err(format!("worker {id} exited without its result").into())
                }
            }
            Err(RecvTimeoutError::Timeout) => Ok(false),
            Err(RecvTimeoutError::Disconnected) => Err("no worker is left".into()),
        }
    }

    fn note(&mut self, id: usize, line: String) -> Result<()> {
        if line == "ready" {
            self.ready += 1;
        } else if let Some(rest) = line.strip_prefix("result ") {
            self.results.insert(id, rest.to_owned());
        } else {
            if let Some(rest) = line.strip_prefix("frozen token=") {
                let token = rest.split(' ').next().unwrap_or_default();
                self.frozen = Some(token.parse().map_err(|_| format!("bad line {line:?}"))?);
            }
            self.timeline(id, &line);
        }
        Ok(())
    }

    fn timeline(&self, id: usize, what: &str) {
        let at = self.started.elapsed().as_secs_f64();
        println!("  [{at:6.2}s] worker {id} | {what}");
    }

    fn go(&mut self, id: usize) -> Result<()> {
        self.tell(id, "go")
    }

    /// Writes `line` to worker `id`'s stdin.
    fn tell(&mut self, id: usize, line: &str) -> Result<()> {
        let stdin = &mut self.stdins[id];
        writeln!(stdin, "{line}").map_err(|e| format!("cannot tell worker {id} {line:?}: {e}"))?;
        stdin.flush()?;
        Ok(())
    }

    fn signal(&self, id: usize, signal: &str) -> Result<()> {
        let pid = self.children[id].id().to_string();
        let status = Command::new("kill").args([signal, &pid]).status()?;
        if !status.success() {
            return Err(format!("kill {signal} {pid} failed: {status}").into());
        }
        Ok(())
    }

    /// Waits for every worker to exit, and fails if one did not exit cleanly.
    fn wait(&mut self) -> Result<()> {
        for (id, child) in self.children.iter_mut().enumerate() {
            let status = child.wait()?;
            if !status.success() {
                return Err(format!("worker {id} failed: {status}").into());
            }
        }
        Ok(())
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.children {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = Command::new("kill")
                    .args(["-CONT", &child.id().to_string()])
                    .status();
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Sends a worker's stdout lines to the coordinator, then that it closed.
fn forward(id: usize, stdout: impl std::io::Read + Send + 'static, tx: Sender<Event>) {
    thread::spawn(move || {
        for line in BufReader::new(stdout)
            .lines()
            .map_while(std::result::Result::ok)
        {
            if tx.send(Event::Line(id, line)).is_err() {
                return;
            }
        }
        let _ = tx.send(Event::Closed(id));
    });
}

/// Runs one sale by `strategy`. With `freeze`, worker 0 starts alone, takes the lock and stops
/// itself before its write; the others start then, and the coordinator resumes it once a newer
/// holder has written to the stock and at least 2.5 leases have passed.
pub fn run(plan: &Plan, strategy: Strategy, freeze: bool, label: &str) -> Result<Report> {
    let db = match &plan.postgres {
        Some(url) => Database::Postgres(url.clone()),
        None => Database::Sqlite(plan.dir.join(format!("{label}.db").replace(' ', "-"))),
    };
    db.create(plan.stock)?;
    let mut workers = Workers::start(plan, strategy, &db, freeze)?;
    workers.until("every worker to be ready", |w| w.ready == plan.procs)?;
    let start;
    if freeze {
        workers.started = Instant::now();
        workers.go(0)?;
        workers.until("worker 0 to freeze", |w| w.frozen.is_some())?;
        // Its buyer waits for `resume`: stopped now, it cannot have written.
        workers.signal(0, "-STOP")?;
        let frozen_at = Instant::now();
        let token = workers.frozen.unwrap_or_default();
        start = frozen_at;
        for id in 1..plan.procs {
            workers.go(id)?;
        }
        let mut conn = db.open()?;
        let least = plan.lease.mul_f64(2.5);
        loop {
            let audit = conn.audit(plan.stock)?;
            let waited = frozen_at.elapsed();
            if audit.fence > token && waited >= least {
                workers.timeline(
                    0,
                    &format!(
                        "SIGCONT after {} ms frozen: the stock's fence is {} (> {token}), {} left",
                        waited.as_millis(),
                        audit.fence,
                        audit.left
                    ),
                );
                break;
            }
            if waited > STEP_TIMEOUT {
                return Err("no newer holder wrote while worker 0 was frozen".into());
            }
            // Take in the workers' lines meanwhile; a quiet spell is no error here.
            workers.pump(Duration::from_millis(20))?;
        }
        workers.signal(0, "-CONT")?;
        workers.tell(0, "resume")?;
    } else {
        start = Instant::now();
        workers.started = start;
        for id in 0..plan.procs {
            workers.go(id)?;
        }
    }
    workers.until("every worker's result", |w| w.results.len() == plan.procs)?;
    let elapsed = start.elapsed();
    workers.wait()?;
    let audit = db.open()?.audit(plan.stock)?;
    let mut report = Report {
        label: label.to_owned(),
        audit,
        sold: 0,
        sold_out: 0,
        fenced: 0,
        lost: 0,
        retries: 0,
        elapsed,
        latencies_us: Vec::new(),
    };
    for result in workers.results.values() {
        add_result(&mut report, result)?;
    }
    report.latencies_us.sort_unstable();
    Ok(report)
}

/// Adds one worker's `result` line to the report.
fn add_result(report: &mut Report, result: &str) -> Result<()> {
    for field in result.split(' ') {
        let (key, value) = field
            .split_once('=')
            .ok_or_else(|| format!("bad result field {field:?}"))?;
        let number = |v: &str| -> Result<u64> {
            v.parse()
                .map_err(|_| format!("bad number in {field:?}").into())
        };
        match key {
            "sold" => report.sold += number(value)?,
            "sold_out" => report.sold_out += number(value)?,
            "fenced" => report.fenced += number(value)?,
            "lost" => report.lost += number(value)?,
            "retries" => report.retries += number(value)?,
            "latencies_us" => {
                for latency in value.split(',').filter(|v| !v.is_empty()) {
                    report.latencies_us.push(number(latency)?);
                }
            }
            _ => return Err(format!("unknown result field {key:?}").into()),
        }
    }
    Ok(())
}
