//! Scenarios: servers, client processes, one kind of fault (in the soak, a random mix) injected
//! again and again, and the checker's verdict.

use crate::checker::{self, Findings};
use crate::clock::now_ns;
use crate::failover;
use crate::history::{self, Event};
use crate::proxy::{Mode as ProxyMode, Proxy};
use crate::resource;
use crate::touches::{self, Touches};
use crate::LOCK_KEY;
use redis::Commands;
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{Failover, Lcg, Monitor, RedisCluster, RedisServer, SentinelSet};

/// Which lock the clients take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `redis_lease::Lock` on one server, with fencing tokens.
    Single,
    /// `redis_lease::RedLock` on three masters (no fencing tokens).
    Red,
    /// `redis_lease::Lock` on a Redis Cluster of three masters and three replicas, with fencing tokens
    /// (kept in the lock's slot).
    Cluster,
    /// `redis_lease::Lock` on a Sentinel-managed primary with one replica and three Sentinels, with
    /// fencing tokens; with `acks`, every acquisition, renewal and release waits for the
    /// replica's acknowledgement (`WAIT`) before it counts.
    Sentinel { acks: bool },
}

impl Mode {
    /// Whether the clients get fencing tokens, so that stale writes can be counted.
    pub fn fenced(self) -> bool {
        self != Mode::Red
    }

    /// The mode `fault_client` takes.
    fn client_mode(self) -> &'static str {
        match self {
            Mode::Single => "single",
            Mode::Red => "redlock",
            Mode::Cluster => "cluster",
            Mode::Sentinel { acks: false } => "sentinel",
            Mode::Sentinel { acks: true } => "sentinel-acks",
        }
    }
}

/// The fault a scenario injects, again and again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// SIGSTOP of the lock server (with RedLock, of one master) for this many leases.
    FreezeServer(u32),
    /// `CLIENT PAUSE` on the lock server for this many leases.
    ClientPause(u32),
    /// `DEBUG SLEEP` on the lock server for this many leases.
    DebugSleep(u32),
    /// SIGSTOP of the client process holding the lock, for this many leases (the long-GC case).
    FreezeHolder(u32),
    /// The lock key's TTL cut to 1 ms while it is held (a key expiring early).
    ExpireKey,
    /// One master killed, and restarted empty after this many leases.
    KillMaster(u32),
    /// One master killed and restarted empty at once.
    RestartMasterNow,
    /// Through a proxy: every reply arrives 1.5 leases late, for this many leases.
    DelayReplies(u32),
    /// Through a proxy: one RedLock master answers 50 ms late (half the clients' node timeout),
    /// for this many leases.
    SlowMaster(u32),
    /// Through a proxy: replies are held for this many leases, then delivered.
    HoldReplies(u32),
    /// The clients' wall clock stepped 5 minutes forward, then back, and so on (libfaketime);
    /// their monotonic clock is left alone.
    ClockJumps,
    /// Through a proxy: bytes dropped both ways for this many leases (with RedLock, to one
    /// master), then every connection reset.
    Partition(u32),
    /// On a cluster: SIGSTOP of the master of the lock's slot for one and a half leases, within
    /// the cluster's node timeout, so that no replica takes over.
    FreezeSlotMaster,
    /// On a cluster: the replica of the lock's slot master made master by a coordinated
    /// `CLUSTER FAILOVER` (the old master stops writes until the replica has caught up).
    PromoteReplica,
    /// On a cluster: the lock's slot, with its keys, moved to another master while the clients
    /// go on, in the steps `redis-cli --cluster reshard` takes.
    Reshard,
    /// On a cluster: the replica of the lock's slot master cut off, the clients on the master
    /// alone for half a lease, the master killed, the replica made master by
    /// `CLUSTER FAILOVER FORCE`, and the old master back, empty, as its replica.
    ForceFailover,
    /// With Sentinels: the replica cut off, the clients on the primary alone for half a lease,
    /// the primary killed, the replica promoted, and the old primary back, empty, as its replica.
    KillUnreplicated,
    /// With Sentinels: `SENTINEL FAILOVER`, the old primary made the new one's replica.
    SentinelFailover,
    /// With Sentinels: the primary frozen (SIGSTOP) until its replica is promoted, then back,
    /// believing it is the primary until the Sentinels make it a replica; then its copy of the
    /// lock is compared with the new primary's.
    FreezePrimary,
    /// Each time one of [`Fault::mix`], drawn from the seed: the soak.
    Mix,
}

impl Fault {
    fn needs_proxy(self) -> bool {
        matches!(
            self,
            Fault::DelayReplies(_)
                | Fault::SlowMaster(_)
                | Fault::HoldReplies(_)
                | Fault::Partition(_)
                | Fault::Mix
        )
    }

    /// Whether the `MONITOR` logs cannot be replayed: the fault restarts servers, which ends
    /// their logs, or moves the lock's key to another node, whose log does not start with it.
    fn ends_logs(self, mode: Mode) -> bool {
        matches!(
            self,
            Fault::KillMaster(_)
                | Fault::RestartMasterNow
                | Fault::PromoteReplica
                | Fault::Reshard
                | Fault::ForceFailover
                | Fault::KillUnreplicated
                | Fault::SentinelFailover
                | Fault::FreezePrimary
        ) || (self == Fault::Mix && matches!(mode, Mode::Red | Mode::Sentinel { .. }))
    }

    /// Whether the clients see nothing of the fault by design, so that it counts as effective
    /// when it was in place: one RedLock master of three cut off, frozen, slow, down or emptied,
    /// or a cluster or a Sentinel set that moved the lock to another server on request, with
    /// its replica caught up.
    fn unseen_by_design(self, mode: Mode) -> bool {
        mode == Mode::Red
            || matches!(
                self,
                Fault::PromoteReplica | Fault::Reshard | Fault::SentinelFailover
            )
    }

    /// How long the fault and the recovery after it may take: the room it needs before the
    /// clients stop. A failover waits for servers to be promoted and synced; an old primary
    /// frozen also for the Sentinels' turning it into a replica (8 s).
    fn room(self, mode: Mode, lease: Duration) -> Duration {
        match self {
            Fault::ForceFailover | Fault::KillUnreplicated | Fault::SentinelFailover => lease * 10,
            Fault::FreezePrimary => lease * 16,
            Fault::Mix => Fault::mix(mode)
                .iter()
                .map(|fault| fault.room(mode, lease))
                .max()
                .unwrap_or(lease * 4),
            _ => lease * 4,
        }
    }

    /// Whether the clients' wall clock is faked, so that it can be stepped.
    fn fakes_clock(self, mode: Mode) -> bool {
        self == Fault::ClockJumps || (self == Fault::Mix && mode == Mode::Single)
    }

    /// The faults of `mode` that stay inside the timing assumptions, which the soak mixes.
    pub fn mix(mode: Mode) -> &'static [Fault] {
        use Fault::*;
        match mode {
            Mode::Single => &[
                FreezeServer(2),
                ClientPause(2),
                DebugSleep(2),
                DelayReplies(2),
                HoldReplies(2),
                Partition(2),
                ClockJumps,
            ],
            Mode::Red => &[KillMaster(2), Partition(2), FreezeServer(2), SlowMaster(2)],
            Mode::Cluster => &[FreezeSlotMaster, PromoteReplica, Reshard],
            // Without the replica's acknowledgement a failover may lose a hold: outside.
            Mode::Sentinel { acks: false } => &[SentinelFailover],
            Mode::Sentinel { acks: true } => &[KillUnreplicated, SentinelFailover, FreezePrimary],
        }
    }
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    /// Whether the fault stays inside the timing assumptions (then overlaps must be 0).
    pub inside: bool,
    pub mode: Mode,
    pub fault: Fault,
    /// Whether the short profile runs it too.
    pub short: bool,
}

/// How a scenario is run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Client processes.
    pub clients: usize,
    /// Threads per client process, sharing its `lease` client; each is a client of its own in
    /// the histories.
    pub threads: usize,
    pub lease: Duration,
    pub duration: Duration,
    /// Time between two faults.
    pub every: Duration,
    pub seed: u64,
    pub client_binary: PathBuf,
    pub dir: PathBuf,
}

/// What a scenario came to.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub scenario: Scenario,
    /// How many faults of each kind were injected.
    pub kinds: BTreeMap<String, usize>,
    /// How many of the faults showed in what the clients saw (or, where clients cannot see
    /// them by design, were in place).
    pub effective: usize,
    pub findings: Findings,
    /// Script writes to leases not their caller's, from the lock servers' logs (not when the
    /// fault restarts servers, which ends their logs).
    pub touches: Option<Touches>,
    /// After each failover that brought the old primary back as a replica, what its copy of the
    /// lock had that the new primary's did not (nothing, if the copies were equal).
    pub diverged: Vec<String>,
}

impl Outcome {
    /// How many faults were injected.
    pub fn injected(&self) -> usize {
        self.kinds.values().sum()
    }

    /// What the scenario came to: see [`Verdict`]. An old primary whose copy of the lock differs
    /// from the new primary's fails the scenario wherever it is.
    pub fn verdict(&self) -> Verdict {
        let f = &self.findings;
        let broken_fencing = f.stale_accepted > 0 || f.token_violations > 0;
        let foreign = self.touches.as_ref().is_some_and(|t| t.foreign > 0);
        if broken_fencing || foreign || !self.diverged.is_empty() {
            Verdict::Fail
        } else if self.scenario.fault != Fault::None && self.effective == 0 {
            Verdict::Inconclusive
        } else if !self.scenario.inside {
            Verdict::AsExpected
        } else if f.overlaps > 0 || f.lost_updates != 0 {
            Verdict::Fail
        } else {
            Verdict::Pass
        }
    }
}

/// What a scenario came to, shown in the report's last column as `pass`, `as expected`,
/// `inconclusive` or `FAIL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Inside the timing assumptions, nothing found.
    Pass,
    /// Outside the timing assumptions, only overlaps and lost updates found.
    AsExpected,
    /// The fault never took effect.
    Inconclusive,
    /// Fencing broken or a lease of another owner touched (anywhere), or inside the timing
    /// assumptions an overlap or a lost update.
    Fail,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "pass",
            Verdict::AsExpected => "as expected",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Fail => "FAIL",
        })
    }
}

/// A pause of about `around`: from half of it to one and a half, drawn from the seeded `random`.
fn jitter(random: &mut Lcg, around: Duration) -> Duration {
    let spread = around.as_millis() as u64 / 2 + 1;
    around / 2 + Duration::from_millis(random.below(spread * 2))
}

/// How long the clients of `scenario` run: the profile's duration, or longer if that leaves no
/// room for one fault (after the longest pause before it) and the recovery after it.
pub fn duration(scenario: &Scenario, settings: &Settings) -> Duration {
    let one_fault =
        START + settings.every * 3 / 2 + scenario.fault.room(scenario.mode, settings.lease);
    match scenario.fault {
        Fault::None => settings.duration,
        _ => settings.duration.max(one_fault + Duration::from_secs(1)),
    }
}

/// How long the clients are given to start before the first fault.
const START: Duration = Duration::from_millis(500);

pub fn run(scenario: &Scenario, settings: &Settings) -> std::io::Result<Outcome> {
    let settings = &Settings {
        duration: duration(scenario, settings),
        ..settings.clone()
    };
    let dir = settings
        .dir
        .join(scenario.name.replace([' ', ':', '(', ')', ','], "_"));
    std::fs::create_dir_all(&dir)?;
    let resource_server = RedisServer::start();
    let mut lock_servers: Vec<RedisServer> = match scenario.mode {
        Mode::Single => vec![RedisServer::start()],
        Mode::Red => (0..3).map(|_| RedisServer::start()).collect(),
        Mode::Cluster | Mode::Sentinel { .. } => Vec::new(),
    };
    let mut cluster = (scenario.mode == Mode::Cluster).then(|| RedisCluster::start(3, 1));
    let mut sentinels = matches!(scenario.mode, Mode::Sentinel { .. }).then(SentinelSet::start);
    let proxies: Vec<Proxy> = if scenario.fault.needs_proxy() {
        lock_servers
            .iter()
            .map(|server| Proxy::start(SocketAddr::from(([127, 0, 0, 1], server.port()))))
            .collect::<std::io::Result<_>>()?
    } else {
        Vec::new()
    };
    let urls: Vec<String> = if let Some(cluster) = &cluster {
        cluster.seed_urls()
    } else if let Some(set) = &sentinels {
        // The name the Sentinels know the primary by, then the Sentinels.
        std::iter::once(set.master_name().to_owned())
            .chain(set.sentinel_urls())
            .collect()
    } else if proxies.is_empty() {
        lock_servers.iter().map(RedisServer::url).collect()
    } else {
        proxies.iter().map(Proxy::url).collect()
    };
    let prefixes: Vec<PathBuf> = (0..settings.clients)
        .map(|n| dir.join(format!("client-{n}")))
        .collect();
    let histories: Vec<PathBuf> = prefixes
        .iter()
        .flat_map(|prefix| {
            (0..settings.threads)
                .map(move |k| PathBuf::from(format!("{}-{k}.jsonl", prefix.display())))
        })
        .collect();
    for history in &histories {
        let _ = std::fs::remove_file(history);
    }
    let clock_file = dir.join("faketime");
    std::fs::write(&clock_file, "+0\n")?;
    let faked = scenario
        .fault
        .fakes_clock(scenario.mode)
        .then_some(clock_file.as_path());
    if faked.is_some() && !Path::new(FAKETIME).is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{FAKETIME} is missing: install Debian's faketime"),
        ));
    }
    // The lock servers' own logs of what they ran, to check that no script touched a lease
    // that was not its caller's; on a cluster, the log of the master of the lock's slot; with
    // Sentinels, that of the primary.
    let monitors: Option<Vec<Monitor>> =
        (!scenario.fault.ends_logs(scenario.mode)).then(|| match (&cluster, &sentinels) {
            (Some(cluster), _) => {
                vec![cluster.server(cluster.master_for_key(LOCK_KEY)).monitor()]
            }
            (_, Some(set)) => vec![set.server(set.primary()).monitor()],
            _ => lock_servers.iter().map(RedisServer::monitor).collect(),
        });
    let mut clients: Vec<Child> = prefixes
        .iter()
        .enumerate()
        .map(|(n, history)| {
            spawn_client(
                settings,
                scenario.mode,
                n,
                history,
                &resource_server.url(),
                &urls,
                faked,
            )
        })
        .collect::<std::io::Result<_>>()?;
    let mut random = Lcg(settings.seed);
    // When each fault was active, and which it was.
    let mut faults: Vec<(u64, u64)> = Vec::new();
    let mut injected: Vec<Fault> = Vec::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut diverged = Vec::new();
    let end = Instant::now() + settings.duration;
    // Let every client start before the first fault.
    thread::sleep(START);
    if scenario.fault != Fault::None {
        loop {
            let pause = jitter(&mut random, settings.every);
            // Room for the fault and the recovery after it.
            let room = scenario.fault.room(scenario.mode, settings.lease);
            if Instant::now() + pause + room >= end {
                break;
            }
            thread::sleep(pause);
            let fault = match scenario.fault {
                Fault::Mix => {
                    let mix = Fault::mix(scenario.mode);
                    mix[random.below(mix.len() as u64) as usize]
                }
                fault => fault,
            };
            let name = format!("{fault:?}");
            let count = kinds.get(&name).copied().unwrap_or(0);
            let targets = Targets {
                servers: &mut lock_servers,
                cluster: cluster.as_mut(),
                sentinels: sentinels.as_mut(),
                proxies: &proxies,
                histories: &histories,
                diverged: &mut diverged,
            };
            if let Some(window) = inject(fault, settings, targets, count) {
                faults.push(window);
                injected.push(fault);
                *kinds.entry(name).or_default() += 1;
            }
        }
    }
    let limit = end + Duration::from_secs(30);
    for client in &mut clients {
        while client.try_wait()?.is_none() {
            if Instant::now() > limit {
                let _ = client.kill();
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = client.wait();
    }
    let touches = monitors.map(|monitors| {
        monitors
            .into_iter()
            .map(|monitor| touches::check(&monitor.stop(), LOCK_KEY))
            .fold(Touches::default(), Touches::and)
    });
    let events = history::merge(&histories);
    let mut store = resource_server.connection();
    let log = resource::log(&mut store).unwrap_or_default();
    let counter = resource::counter(&mut store).unwrap_or(0);
    let findings = checker::check(&events, &log, counter, scenario.mode.fenced(), &faults);
    // Which faults showed in what the clients saw.
    let jumped = wall_clock_jumped(&events);
    let horizon = (settings.lease * 2).as_nanos() as u64;
    let effective = faults
        .iter()
        .zip(&injected)
        .filter(|&(&window, &fault)| match fault {
            _ if fault.unseen_by_design(scenario.mode) => true,
            // The clients record their wall clock.
            Fault::ClockJumps => jumped,
            _ => checker::seen(&events, window, horizon),
        })
        .count();
    Ok(Outcome {
        scenario: scenario.clone(),
        kinds,
        effective,
        findings,
        touches,
        diverged,
    })
}

/// libfaketime, as Debian's `faketime` package installs it.
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Whether some client's wall clock moved against its monotonic clock by more than 4 minutes.
fn wall_clock_jumped(events: &[Event]) -> bool {
    let mut offsets: std::collections::HashMap<&str, (i64, i64)> = Default::default();
    for event in events {
        if let Event::AcquireOk {
            client, t, wall_ms, ..
        } = event
        {
            let offset = *wall_ms as i64 - (*t / 1_000_000) as i64;
            let range = offsets.entry(client).or_insert((offset, offset));
            range.0 = range.0.min(offset);
            range.1 = range.1.max(offset);
        }
    }
    offsets.values().any(|(low, high)| high - low > 240_000)
}

fn spawn_client(
    settings: &Settings,
    mode: Mode,
    n: usize,
    history: &Path,
    resource_url: &str,
    urls: &[String],
    faked_clock: Option<&Path>,
) -> std::io::Result<Child> {
    let mut command = Command::new(&settings.client_binary);
    if let Some(clock_file) = faked_clock {
        command
            .env("LD_PRELOAD", FAKETIME)
            .env("FAKETIME_TIMESTAMP_FILE", clock_file)
            .env("FAKETIME_NO_CACHE", "1")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    }
    command
        .arg(format!("c{n}"))
        .arg(history)
        .arg(resource_url)
        .arg(mode.client_mode())
        .arg(settings.lease.as_millis().to_string())
        .arg(settings.duration.as_millis().to_string())
        .arg(settings.threads.to_string())
        .args(urls)
        .stdout(Stdio::null())
        .spawn()
}

/// What a fault is injected into.
struct Targets<'a> {
    servers: &'a mut [RedisServer],
    cluster: Option<&'a mut RedisCluster>,
    sentinels: Option<&'a mut SentinelSet>,
    proxies: &'a [Proxy],
    histories: &'a [PathBuf],
    /// Where a failover that brings the old primary back tells how its copy differed.
    diverged: &'a mut Vec<String>,
}

/// Injects one fault; returns the window in which it was active.
fn inject(
    fault: Fault,
    settings: &Settings,
    targets: Targets<'_>,
    count: usize,
) -> Option<(u64, u64)> {
    let Targets {
        servers,
        cluster,
        sentinels,
        proxies,
        histories,
        diverged,
    } = targets;
    let lease = settings.lease;
    let start = now_ns();
    match fault {
        Fault::None | Fault::Mix => return None,
        Fault::FreezeServer(leases) => {
            let victim = count % servers.len();
            servers[victim].pause();
            thread::sleep(lease * leases);
            servers[victim].resume();
        }
        Fault::SlowMaster(leases) => {
            let victim = &proxies[count % proxies.len()];
            victim.set(ProxyMode::DelayReplies(lease / 20));
            thread::sleep(lease * leases);
            victim.set(ProxyMode::Pass);
        }
        Fault::ClientPause(leases) => {
            let millis = (lease * leases).as_millis() as u64;
            let paused: redis::RedisResult<()> = redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(millis)
                .arg("ALL")
                .query(&mut servers[0].connection());
            paused.ok()?;
            thread::sleep(lease * leases);
        }
        Fault::DebugSleep(leases) => {
            let seconds = (lease * leases).as_secs_f64();
            let _: redis::RedisResult<()> = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(seconds)
                .query(&mut servers[0].connection());
        }
        Fault::FreezeHolder(leases) => {
            let pid = holder_pid(&servers[0], histories)?;
            signal(pid, "-STOP");
            thread::sleep(lease * leases);
            signal(pid, "-CONT");
        }
        Fault::ExpireKey => {
            let cut: redis::RedisResult<i64> = servers[0].connection().pexpire(LOCK_KEY, 1);
            if cut.ok()? == 0 {
                return None;
            }
        }
        Fault::KillMaster(leases) => {
            let victim = count % servers.len();
            servers[victim].stop();
            thread::sleep(lease * leases);
            servers[victim].start_again();
        }
        Fault::RestartMasterNow => {
            let victim = count % servers.len();
            servers[victim].restart();
        }
        Fault::ClockJumps => {
            let offset = if count.is_multiple_of(2) {
                "+5m"
            } else {
                "-5m"
            };
            let clock_file = histories.first()?.with_file_name("faketime");
            std::fs::write(clock_file, format!("{offset}\n")).ok()?;
        }
        Fault::FreezeSlotMaster => {
            let cluster = cluster?;
            let master = cluster.master_for_key(LOCK_KEY);
            cluster.pause(master);
            thread::sleep(lease * 3 / 2);
            cluster.resume(master);
        }
        Fault::PromoteReplica => {
            let cluster = cluster?;
            let master = cluster.master_for_key(LOCK_KEY);
            let replica = *cluster.replicas_of(master).first()?;
            cluster.failover(replica, Failover::Coordinated);
        }
        Fault::Reshard => {
            let cluster = cluster?;
            let slot = testkit::slot(LOCK_KEY);
            let from = cluster.master_of_slot(slot);
            let masters = cluster.masters();
            let at = masters.iter().position(|&port| port == from)?;
            let to = masters[(at + 1) % masters.len()];
            cluster.migrate_slot(slot, from, to);
        }
        Fault::ForceFailover => failover::force_behind(cluster?, lease)?,
        Fault::KillUnreplicated => failover::kill_unreplicated(sentinels?, lease),
        Fault::SentinelFailover => failover::on_request(sentinels?),
        Fault::FreezePrimary => diverged.extend(failover::freeze_primary(sentinels?)),
        Fault::DelayReplies(leases) => {
            proxies[0].set(ProxyMode::DelayReplies(lease * 3 / 2));
            thread::sleep(lease * leases);
            proxies[0].set(ProxyMode::Pass);
        }
        Fault::HoldReplies(leases) => {
            proxies[0].set(ProxyMode::HoldReplies);
            thread::sleep(lease * leases);
            proxies[0].set(ProxyMode::Pass);
        }
        Fault::Partition(leases) => {
            let victim = &proxies[count % proxies.len()];
            victim.set(ProxyMode::Blackhole);
            thread::sleep(lease * leases);
            // Bytes were dropped mid-stream: the connections cannot be trusted any more.
            victim.reset();
            victim.set(ProxyMode::Pass);
        }
    }
    Some((start, now_ns()))
}

/// The process id of the client holding `{jobs}` on `server`, from the owner ids the clients
/// recorded when they started.
fn holder_pid(server: &RedisServer, histories: &[PathBuf]) -> Option<u32> {
    let fields: Vec<String> = server.connection().hkeys(LOCK_KEY).ok()?;
    // Owner ids never start with ':', the hold's own fields always do.
    let owner = fields.iter().find(|field| !field.starts_with(':'))?;
    history::merge(histories)
        .into_iter()
        .find_map(|event| match event {
            Event::Start { owner: o, pid, .. } if &o == owner => Some(pid),
            _ => None,
        })
}

fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(duration: Duration) -> Settings {
        Settings {
            clients: 1,
            threads: 1,
            lease: Duration::from_secs(1),
            duration,
            every: Duration::from_secs(3),
            seed: 1,
            client_binary: PathBuf::new(),
            dir: PathBuf::new(),
        }
    }

    fn scenario(mode: Mode, fault: Fault) -> Scenario {
        Scenario {
            name: "test",
            inside: true,
            mode,
            fault,
            short: true,
        }
    }

    #[test]
    fn a_short_run_leaves_room_for_one_failover_and_its_recovery() {
        let short = settings(Duration::from_secs(10));
        let failover = scenario(Mode::Sentinel { acks: true }, Fault::KillUnreplicated);
        let lasts = duration(&failover, &short);
        let room =
            START + short.every * 3 / 2 + Fault::KillUnreplicated.room(failover.mode, short.lease);
        assert!(lasts > room, "{lasts:?} leaves no room for {room:?}");
    }

    #[test]
    fn faults_that_fit_keep_the_profile_duration() {
        for duration_of_profile in [Duration::from_secs(10), Duration::from_secs(45)] {
            let profile = settings(duration_of_profile);
            for fault in [Fault::None, Fault::FreezeServer(2), Fault::Mix] {
                let run = scenario(Mode::Single, fault);
                assert_eq!(duration(&run, &profile), duration_of_profile, "{fault:?}");
            }
        }
        let long = settings(Duration::from_secs(45));
        let frozen = scenario(Mode::Sentinel { acks: true }, Fault::FreezePrimary);
        assert_eq!(duration(&frozen, &long), long.duration);
    }

    fn outcome(inside: bool, effective: usize, findings: Findings) -> Outcome {
        Outcome {
            scenario: Scenario {
                inside,
                ..scenario(Mode::Single, Fault::FreezeServer(2))
            },
            kinds: BTreeMap::new(),
            effective,
            findings,
            touches: None,
            diverged: Vec::new(),
        }
    }

    #[test]
    fn verdicts_read_as_the_report_prints_them() {
        let words: Vec<String> = [
            Verdict::Pass,
            Verdict::AsExpected,
            Verdict::Inconclusive,
            Verdict::Fail,
        ]
        .iter()
        .map(Verdict::to_string)
        .collect();
        assert_eq!(words, ["pass", "as expected", "inconclusive", "FAIL"]);
    }

    #[test]
    fn overlaps_fail_inside_the_assumptions_and_are_expected_outside() {
        let overlapping = Findings {
            overlaps: 1,
            ..Findings::default()
        };
        assert_eq!(
            outcome(true, 1, overlapping.clone()).verdict(),
            Verdict::Fail
        );
        assert_eq!(
            outcome(false, 1, overlapping).verdict(),
            Verdict::AsExpected
        );
        assert_eq!(
            outcome(true, 1, Findings::default()).verdict(),
            Verdict::Pass
        );
        assert_eq!(
            outcome(true, 0, Findings::default()).verdict(),
            Verdict::Inconclusive
        );
        let stale = Findings {
            stale_accepted: 1,
            ..Findings::default()
        };
        assert_eq!(outcome(false, 0, stale).verdict(), Verdict::Fail);
    }
}
