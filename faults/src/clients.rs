//! The client processes of a scenario (`fault_client`): started together, each for the
//! scenario's time; one of them killed (SIGKILL) while all its threads wait for the lock and
//! started again in its place for the rest of the time, as a supervisor restarts a service that
//! died (the new process's threads append to the same histories); and waited for at the end.

use crate::clock::now_ns;
use crate::ends::Exit;
use crate::history;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// libfaketime, as Debian's `faketime` package installs it.
pub const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// What every client process of a scenario is started with.
pub(crate) struct Launch {
    pub binary: PathBuf,
    /// `FAULT_PRIMITIVE`.
    pub primitive: String,
    /// The deployment, as `fault_client` names it.
    pub mode: &'static str,
    pub lease: Duration,
    pub threads: usize,
    pub resource_url: String,
    /// The file libfaketime reads the clients' wall clock offset from, if it is faked.
    pub faked_clock: Option<PathBuf>,
}

/// One client process: the prefix of its threads' histories, and the URLs it is given.
pub(crate) struct Process {
    pub prefix: PathBuf,
    pub urls: Vec<String>,
}

/// The client processes of a scenario, running.
pub(crate) struct Clients {
    launch: Launch,
    each: Vec<Process>,
    children: Vec<Child>,
    /// When their time is up.
    end: Instant,
}

impl Clients {
    /// Starts `each` process for `run_for`.
    pub fn start(
        launch: Launch,
        each: Vec<Process>,
        run_for: Duration,
    ) -> std::io::Result<Clients> {
        let mut clients = Clients {
            launch,
            each,
            children: Vec::new(),
            end: Instant::now() + run_for,
        };
        for n in 0..clients.each.len() {
            let child = clients.spawn(n, run_for)?;
            clients.children.push(child);
        }
        Ok(clients)
    }

    fn spawn(&self, n: usize, run_for: Duration) -> std::io::Result<Child> {
        let launch = &self.launch;
        let mut command = Command::new(&launch.binary);
        if let Some(clock_file) = &launch.faked_clock {
            command
                .env("LD_PRELOAD", FAKETIME)
                .env("FAKETIME_TIMESTAMP_FILE", clock_file)
                .env("FAKETIME_NO_CACHE", "1")
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        command
            .env("FAULT_PRIMITIVE", &launch.primitive)
            .arg(client_name(n))
            .arg(&self.each[n].prefix)
            .arg(&launch.resource_url)
            .arg(launch.mode)
            .arg(launch.lease.as_millis().to_string())
            .arg(run_for.as_millis().to_string())
            .arg(launch.threads.to_string())
            .args(&self.each[n].urls)
            .stdout(Stdio::null())
            .spawn()
    }

    /// The history files of process `n`'s threads.
    fn histories(&self, n: usize) -> Vec<PathBuf> {
        (0..self.launch.threads)
            .map(|k| thread_history(&self.each[n].prefix, k))
            .collect()
    }

    /// Kills a process all of whose threads wait for the lock, one of them for `waited` at
    /// least, looked for in their histories for up to `search` (from process `turn` on, so that
    /// each takes its turn); then starts another in its place for the rest of the scenario's
    /// time. Returns when it was killed and when the new one started, or nothing if no process
    /// was found waiting (or too little time is left).
    pub fn restart_a_waiter(
        &mut self,
        turn: usize,
        waited: Duration,
        search: Duration,
    ) -> Option<(u64, u64)> {
        let give_up = Instant::now() + search;
        let waited = waited.as_nanos() as u64;
        let processes = self.each.len();
        let victim = loop {
            let now = now_ns();
            let found = (0..processes).map(|i| (turn + i) % processes).find(|&n| {
                let since: Option<Vec<u64>> = self
                    .histories(n)
                    .iter()
                    .map(|path| history::waiting_since(path))
                    .collect();
                since.is_some_and(|since| {
                    since
                        .iter()
                        .any(|&since| now.saturating_sub(since) >= waited)
                })
            });
            if let Some(n) = found {
                break n;
            }
            if Instant::now() >= give_up {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        };
        let left = self.end.saturating_duration_since(Instant::now());
        if left < self.launch.lease {
            return None;
        }
        let killed = now_ns();
        let _ = self.children[victim].kill();
        let _ = self.children[victim].wait();
        let left = self.end.saturating_duration_since(Instant::now());
        // One that cannot be started leaves the killed one's exit and histories without their
        // run done: the scenario says it ended early.
        if let Ok(child) = self.spawn(victim, left) {
            self.children[victim] = child;
        }
        Some((killed, now_ns()))
    }

    /// Waits for every process, killing those still running at `limit`; how each ended.
    pub fn wait(mut self, limit: Instant) -> std::io::Result<Vec<(String, Exit)>> {
        let mut exits = Vec::new();
        for (n, child) in self.children.iter_mut().enumerate() {
            let exit = loop {
                if let Some(status) = child.try_wait()? {
                    break Exit::Exited(status);
                }
                if Instant::now() > limit {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Exit::Killed;
                }
                thread::sleep(Duration::from_millis(20));
            };
            exits.push((client_name(n), exit));
        }
        Ok(exits)
    }
}

/// The name of client process `n`; its workers are `NAME.K` in the histories.
pub(crate) fn client_name(n: usize) -> String {
    format!("c{n}")
}

/// The history file of thread `k` of the process whose histories start with `prefix`.
pub(crate) fn thread_history(prefix: &Path, k: usize) -> PathBuf {
    PathBuf::from(format!("{}-{k}.jsonl", prefix.display()))
}
