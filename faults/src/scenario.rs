//! Running a scenario: the servers of its deployment, client processes, its fault (in the soak,
//! a random mix) injected again and again, and the checker over what the clients did.

use crate::checker::{self, Findings};
use crate::clients::{self, Clients, Launch, Process, FAKETIME};
use crate::ends::{self, EarlyEnd};
use crate::fault::{Evidence, Fault, Targets};
use crate::history::{self, Event};
use crate::mode::Mode;
use crate::postgres::{self, Route};
use crate::primitive::Primitive;
use crate::proxy::Proxy;
use crate::resource;
use crate::touches::{self, Touches};
use crate::verdict::{Judged, Verdict};
use crate::LOCK_KEY;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{Lcg, Monitor, RedisCluster, RedisServer, SentinelSet, ZooKeeperEnsemble};

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    /// Whether the fault stays inside the timing assumptions (then overlaps must be 0).
    pub inside: bool,
    pub mode: Mode,
    pub fault: Fault,
    /// Whether the short profile runs it too.
    pub short: bool,
    /// What the clients take.
    pub primitive: Primitive,
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
    /// The client processes and workers that ended before their time, and why.
    pub ended_early: Vec<EarlyEnd>,
}

impl Outcome {
    /// How many faults were injected.
    pub fn injected(&self) -> usize {
        self.kinds.values().sum()
    }

    /// What the scenario came to.
    pub fn verdict(&self) -> Verdict {
        Verdict::of(
            &self.findings,
            Judged {
                inside: self.scenario.inside,
                ineffective: self.scenario.fault != Fault::None && self.effective == 0,
                foreign_touches: self.touches.as_ref().is_some_and(|t| t.foreign > 0),
                diverged: !self.diverged.is_empty(),
                ended_early: !self.ended_early.is_empty(),
            },
        )
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
    let one_fault = START + settings.every * 3 / 2 + room(scenario, settings.lease);
    match scenario.fault {
        Fault::None => settings.duration,
        _ => settings.duration.max(one_fault + Duration::from_secs(1)),
    }
}

/// How long `scenario`'s fault and the recovery after it may take.
fn room(scenario: &Scenario, lease: Duration) -> Duration {
    lease * scenario.fault.traits(scenario.mode).room_leases
}

/// How long the clients are given to start before the first fault.
const START: Duration = Duration::from_millis(500);

/// The `zoo.cfg` lines of the ZooKeeper servers beyond testkit's: no fsync of the transaction
/// log. The faults kill server processes, not the host, and what a killed process had written
/// is in the page cache: it survives as it would with fsync. Three servers fsyncing on one
/// shared disk would only add latency that varies with the other builds on the machine.
const ZOOKEEPER_SETTINGS: &[&str] = &["forceSync=no"];

pub fn run(scenario: &Scenario, settings: &Settings) -> std::io::Result<Outcome> {
    let settings = &Settings {
        duration: duration(scenario, settings),
        ..settings.clone()
    };
    let dir = settings
        .dir
        .join(scenario.name.replace([' ', ':', '(', ')', ','], "_"));
    std::fs::create_dir_all(&dir)?;
    let traits = scenario.fault.traits(scenario.mode);
    let resource_server = RedisServer::start();
    let mut lock_servers: Vec<RedisServer> = match scenario.mode {
        Mode::Single => vec![RedisServer::start()],
        Mode::Red => (0..3).map(|_| RedisServer::start()).collect(),
        Mode::Cluster | Mode::Sentinel { .. } | Mode::ZooKeeper | Mode::Postgres { .. } => {
            Vec::new()
        }
    };
    let mut cluster = (scenario.mode == Mode::Cluster).then(|| RedisCluster::start(3, 1));
    let mut sentinels = matches!(scenario.mode, Mode::Sentinel { .. }).then(|| {
        if traits.partitionable {
            SentinelSet::start_partitionable()
        } else {
            SentinelSet::start()
        }
    });
    let mut ensemble = (scenario.mode == Mode::ZooKeeper)
        .then(|| ZooKeeperEnsemble::start_with(3, ZOOKEEPER_SETTINGS));
    let mut postgres = match scenario.mode {
        Mode::Postgres { pooled } => Some(postgres::Deployment::start(pooled)),
        _ => None,
    };
    // Each client process's own proxies in front of every ZooKeeper server, for faults that cut
    // one process off.
    let client_proxies: Vec<Vec<testkit::Proxy>> = match &ensemble {
        Some(ensemble) if traits.client_proxies => (0..settings.clients)
            .map(|_| {
                (0..ensemble.len())
                    .map(|node| {
                        testkit::Proxy::start(SocketAddr::from((
                            [127, 0, 0, 1],
                            ensemble.port(node),
                        )))
                    })
                    .collect()
            })
            .collect(),
        _ => Vec::new(),
    };
    let proxies: Vec<Proxy> = match &postgres {
        _ if !traits.proxied => Vec::new(),
        Some(postgres) => vec![Proxy::start(postgres.addr())?],
        None => lock_servers
            .iter()
            .map(|server| Proxy::start(SocketAddr::from(([127, 0, 0, 1], server.port()))))
            .collect::<std::io::Result<_>>()?,
    };
    let urls: Vec<String> = if let Some(cluster) = &cluster {
        cluster.seed_urls()
    } else if let Some(set) = &sentinels {
        // The name the Sentinels know the primary by, then the Sentinels.
        std::iter::once(set.master_name().to_owned())
            .chain(set.sentinel_urls())
            .collect()
    } else if let Some(ensemble) = &ensemble {
        ensemble
            .connect_string()
            .split(',')
            .map(str::to_owned)
            .collect()
    } else if let Some(postgres) = &postgres {
        let route = if traits.listening_proxied {
            Route::Listening
        } else {
            Route::Calls
        };
        postgres.urls(proxies.first(), route)
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
                .map(|k| clients::thread_history(prefix, k))
                // An election's observer (a file only elections write).
                .chain([PathBuf::from(format!("{}-obs.jsonl", prefix.display()))])
        })
        .collect();
    for history in &histories {
        let _ = std::fs::remove_file(history);
    }
    let clock_file = dir.join("faketime");
    std::fs::write(&clock_file, "+0\n")?;
    let faked = traits.fakes_clock.then_some(clock_file.as_path());
    if faked.is_some() && !Path::new(FAKETIME).is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{FAKETIME} is missing: install Debian's faketime"),
        ));
    }
    // The lock servers' own logs of what they ran, to check that no script touched a lease
    // that was not its caller's; on a cluster, the log of the master of the lock's slot; with
    // Sentinels, that of the primary.
    // Only a lock's: the log is read for the lock's own scripts and key.
    let monitors: Option<Vec<Monitor>> =
        (!traits.ends_logs && scenario.mode.on_redis() && scenario.primitive == Primitive::Lock)
            .then(|| match (&cluster, &sentinels) {
                (Some(cluster), _) => {
                    vec![cluster.server(cluster.master_for_key(LOCK_KEY)).monitor()]
                }
                (_, Some(set)) => vec![set.server(set.primary()).monitor()],
                _ => lock_servers.iter().map(RedisServer::monitor).collect(),
            });
    let launch = Launch {
        binary: settings.client_binary.clone(),
        primitive: scenario.primitive.arg(),
        mode: scenario.mode.client_mode(),
        lease: settings.lease,
        threads: settings.threads,
        resource_url: resource_server.url(),
        faked_clock: faked.map(Path::to_path_buf),
    };
    let each = prefixes
        .iter()
        .enumerate()
        .map(|(n, prefix)| Process {
            prefix: prefix.clone(),
            urls: match client_proxies.get(n) {
                Some(proxies) => proxies.iter().map(testkit::Proxy::addr).collect(),
                None => urls.clone(),
            },
        })
        .collect();
    let mut clients = Clients::start(launch, each, settings.duration)?;
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
            if Instant::now() + pause + room(scenario, settings.lease) >= end {
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
                ensemble: ensemble.as_mut(),
                proxies: &proxies,
                client_proxies: &client_proxies,
                histories: &histories,
                diverged: &mut diverged,
                postgres: postgres.as_mut(),
                clients: &mut clients,
            };
            if let Some(window) = fault.inject(settings.lease, count, targets) {
                faults.push(window);
                injected.push(fault);
                *kinds.entry(name).or_default() += 1;
            }
        }
    }
    let exits = clients.wait(end + Duration::from_secs(30))?;
    let touches = monitors.map(|monitors| {
        monitors
            .into_iter()
            .map(|monitor| touches::check(&monitor.stop(), LOCK_KEY))
            .fold(Touches::default(), Touches::and)
    });
    let events = history::merge(&histories);
    let ended_early = ends::early(&exits, settings.threads, &events);
    let mut store = resource_server.connection();
    let log = resource::log(&mut store).unwrap_or_default();
    let counter = resource::counter(&mut store).unwrap_or(0);
    let findings = checker::check(
        &events,
        &log,
        counter,
        scenario.mode.fenced(),
        &faults,
        scenario.primitive,
    );
    // Which faults showed in what the clients saw.
    let jumped = wall_clock_jumped(&events);
    let horizon = (settings.lease * 2).as_nanos() as u64;
    let effective = faults
        .iter()
        .zip(&injected)
        .filter(
            |&(&window, &fault)| match fault.traits(scenario.mode).evidence {
                Evidence::InPlace => true,
                Evidence::WallClockJump => jumped,
                Evidence::NewEpoch => checker::new_epoch(&events, window, horizon),
                Evidence::Symptom => checker::seen(&events, window, horizon),
            },
        )
        .count();
    Ok(Outcome {
        scenario: scenario.clone(),
        kinds,
        effective,
        findings,
        touches,
        diverged,
        ended_early,
    })
}

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
            primitive: Primitive::Lock,
        }
    }

    #[test]
    fn a_short_run_leaves_room_for_one_failover_and_its_recovery() {
        let short = settings(Duration::from_secs(10));
        let failover = scenario(Mode::Sentinel { acks: true }, Fault::KillUnreplicated);
        let lasts = duration(&failover, &short);
        let room = START + short.every * 3 / 2 + room(&failover, short.lease);
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
}
