//! A Sentinel-managed primary for tests: one primary, one replica and three
//! `redis-server --sentinel` processes on loopback (quorum 2, down after a few hundred
//! milliseconds), all killed on drop. It can fail over on request (`SENTINEL FAILOVER`), kill or
//! freeze the primary, freeze the replica so that writes the primary acknowledges do not reach
//! it, and stop writes while a test compares the two copies.
//!
//! Data servers are named by their port. Every wait has a deadline and fails the test saying what
//! it last saw.

use std::fs;
use std::time::Duration;

use crate::gate::{Gate, PEER_SOURCE};
use crate::info::field;
use crate::redis_server::{Launch, Mode};
use crate::tls::TlsSettings;
use crate::wait::wait_for;
use crate::RedisServer;
use crate::TlsCertificates;
use std::sync::Arc;

/// The name the Sentinels monitor the primary under.
const MASTER_NAME: &str = "testkit";

/// How long a wait for the Sentinels or the replication may take before the test fails.
const SETTLE: Duration = Duration::from_secs(20);

/// A primary, a replica and three Sentinels, killed on drop.
pub struct SentinelSet {
    /// The two data servers: the first started as the primary, the second as its replica.
    data: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    /// The gates in front of the data servers, in a set that can be partitioned.
    gates: Vec<Gate>,
    /// Holds the Sentinels' configuration files, which they rewrite.
    _configs: tempfile::TempDir,
}

impl SentinelSet {
    /// How long the primary may fail to answer before a Sentinel counts it as down
    /// (`down-after-milliseconds`).
    pub const DOWN_AFTER: Duration = Duration::from_millis(800);

    /// `failover-timeout`: a failover that stalls is retried after twice this.
    pub const FAILOVER_TIMEOUT: Duration = Duration::from_millis(3_000);

    /// Starts the primary and its replica, waits until the replica has synced, then starts the
    /// three Sentinels and waits until each knows the replica and the two other Sentinels and
    /// can reach its quorum (`SENTINEL CKQUORUM`).
    pub fn start() -> SentinelSet {
        Self::start_with(None, None, false)
    }

    /// [`SentinelSet::start`] with each data server behind a [`Gate`], and the Sentinels and
    /// data servers connecting to one another from [`PEER_SOURCE`]: clients of the test, which
    /// connect from 127.0.0.1, can be left on the primary's side of a partition while the
    /// Sentinels and the replica are cut off from it ([`SentinelSet::partition_primary`]).
    /// The Sentinels and clients know the data servers by their gates' ports.
    pub fn start_partitionable() -> SentinelSet {
        Self::start_with(None, None, true)
    }

    /// [`SentinelSet::start`], every server (data servers and Sentinels) requiring `password`
    /// of its clients (`requirepass`), the replica and the Sentinels logging in with it
    /// (`masterauth`, `sentinel auth-pass`).
    pub fn start_with_password(password: &str) -> SentinelSet {
        Self::start_with(Some(password), None, false)
    }

    /// [`SentinelSet::start`], every server (data servers and Sentinels) speaking TLS only and
    /// requiring a client certificate signed by `certificates`' CA; the replica and the
    /// Sentinels connect over TLS with the client certificate (`tls-replication`). URLs are
    /// `rediss://`.
    pub fn start_tls(certificates: Arc<TlsCertificates>) -> SentinelSet {
        Self::start_with(
            None,
            Some(TlsSettings::requiring_client_certificates(certificates)),
            false,
        )
    }

    fn start_with(
        password: Option<&str>,
        tls: Option<TlsSettings>,
        partitionable: bool,
    ) -> SentinelSet {
        let mut login: Vec<String> = password
            .map(|password| vec!["--requirepass".into(), password.into()])
            .unwrap_or_default();
        let peers: Vec<String> = match partitionable {
            // Connections between servers come from PEER_SOURCE, which protected mode would
            // refuse; replicas announce the address the Sentinels can reach.
            true => [
                "--bind-source-addr",
                "127.0.0.2",
                "--protected-mode",
                "no",
                "--replica-announce-ip",
                "127.0.0.1",
            ]
            .map(String::from)
            .into(),
            false => Vec::new(),
        };
        if tls.is_some() {
            login.extend(["--tls-replication".into(), "yes".into()]);
        }
        let data_server = || {
            // A replica's full sync starts at once (the default waits 5 s for more replicas).
            let mut extra: Vec<String> =
                ["--repl-diskless-sync-delay", "0"].map(String::from).into();
            extra.extend(login.iter().cloned());
            extra.extend(peers.iter().cloned());
            if let Some(password) = password {
                extra.extend(["--masterauth".into(), password.into()]);
            }
            RedisServer::launch(Launch {
                mode: tls.clone().map_or(Mode::Plain, Mode::Tls),
                cluster_bus: false,
                extra,
            })
        };
        let primary = data_server();
        let replica = data_server();
        let gates: Vec<Gate> = match partitionable {
            true => [&primary, &replica]
                .map(|server| {
                    let gate = Gate::start(server.port());
                    // As a replica, it announces its gate.
                    let () = server
                        .query(
                            redis::cmd("CONFIG")
                                .arg("SET")
                                .arg("replica-announce-port")
                                .arg(gate.port()),
                        )
                        .unwrap_or_else(|error| panic!("CONFIG SET: {error}"));
                    gate
                })
                .into(),
            false => Vec::new(),
        };
        let primary_address = gates.first().map_or(primary.port(), Gate::port);
        let () = replica
            .query(
                redis::cmd("REPLICAOF")
                    .arg("127.0.0.1")
                    .arg(primary_address),
            )
            .unwrap_or_else(|error| panic!("REPLICAOF: {error}"));
        let configs = tempfile::tempdir().expect("a temporary directory");
        let mut set = SentinelSet {
            data: vec![primary, replica],
            sentinels: Vec::new(),
            gates,
            _configs: configs,
        };
        set.wait_replicated();

        let primary_port = primary_address;
        for index in 0..3 {
            let config = set._configs.path().join(format!("sentinel-{index}.conf"));
            let down_after = Self::DOWN_AFTER.as_millis();
            let failover_timeout = Self::FAILOVER_TIMEOUT.as_millis();
            let text = format!(
                "sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} {down_after}\n\
                 sentinel failover-timeout {MASTER_NAME} {failover_timeout}\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n"
            );
            let text = match partitionable {
                // Sentinels announce the address of their connection to the primary, which
                // would be PEER_SOURCE, where they do not listen.
                true => format!(
                    "{text}bind-source-addr 127.0.0.2\nprotected-mode no\n\
                     sentinel announce-ip 127.0.0.1\n"
                ),
                false => text,
            };
            let text = match password {
                // The data servers' password, and the other Sentinels'.
                Some(password) => format!(
                    "{text}sentinel auth-pass {MASTER_NAME} {password}\n\
                     sentinel sentinel-pass {password}\n"
                ),
                None => text,
            };
            fs::write(&config, text).expect("write a Sentinel configuration");
            let sentinel = RedisServer::launch(Launch {
                mode: Mode::Sentinel {
                    config,
                    tls: tls.clone(),
                },
                cluster_bus: false,
                extra: login.clone(),
            });
            // Faster than the defaults, which suit a network rather than loopback: INFO every
            // second (10 s), down-state questions every 250 ms (1 s), and 5 s of TILT (30 s)
            // after a stall. Pings and reconnections every 300 ms (1 s): after a failover a
            // Sentinel reconnects to the new primary no sooner than one period after its last
            // attempt on the old one, and would count the new primary down if that took longer
            // than DOWN_AFTER. Not shorter either: a replica is promoted only if its last INFO
            // is at most five periods old, and during a failover Sentinels ask replicas for INFO
            // once a second. Hellos keep their 2 s: a Sentinel turns back into a replica a
            // replica that reports itself master for four hello periods, and the leader of a
            // failover announces the promotion in a hello only after an INFO shows it.
            let () = sentinel
                .query(redis::cmd("SENTINEL").arg("DEBUG").arg(&[
                    "ping-period",
                    "300",
                    "info-period",
                    "1000",
                    "ask-period",
                    "250",
                    "tilt-period",
                    "5000",
                ]))
                .unwrap_or_else(|error| panic!("SENTINEL DEBUG: {error}"));
            set.sentinels.push(sentinel);
        }
        set.wait("the Sentinels to know the replica and each other", || {
            set.check_sentinels_ready()
        });
        set
    }

    fn check_sentinels_ready(&self) -> Result<(), String> {
        for sentinel in &self.sentinels {
            let replicas: Vec<Vec<String>> =
                sentinel.query(redis::cmd("SENTINEL").arg("REPLICAS").arg(MASTER_NAME))?;
            let usable = replicas.iter().any(|replica| {
                let flags = pair(replica, "flags").unwrap_or("");
                !flags.contains("s_down") && !flags.contains("disconnected")
            });
            if !usable {
                return Err(format!("port {}: replicas {replicas:?}", sentinel.port()));
            }
            let others: Vec<redis::Value> =
                sentinel.query(redis::cmd("SENTINEL").arg("SENTINELS").arg(MASTER_NAME))?;
            if others.len() != self.sentinels.len() - 1 {
                return Err(format!(
                    "port {}: knows {} other Sentinels",
                    sentinel.port(),
                    others.len()
                ));
            }
            let _: String =
                sentinel.query(redis::cmd("SENTINEL").arg("CKQUORUM").arg(MASTER_NAME))?;
        }
        Ok(())
    }

    /// [`wait_for`] with the settling deadline, failing with the end of every process's log.
    fn wait<T>(&self, what: &str, probe: impl FnMut() -> Result<T, String>) -> T {
        let logs = || {
            let servers = self.data.iter().chain(&self.sentinels);
            servers.map(|server| server.log_tail(20)).collect()
        };
        wait_for(what, SETTLE, probe, logs)
    }

    /// The name the Sentinels know the primary by (`sentinel monitor <name> ...`).
    pub fn master_name(&self) -> &str {
        MASTER_NAME
    }

    /// `redis://127.0.0.1:port` of each Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The three Sentinel processes.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The data server on `port` (the primary or the replica).
    pub fn server(&self, port: u16) -> &RedisServer {
        let port = self.behind_gate(port);
        self.data
            .iter()
            .find(|server| server.port() == port)
            .unwrap_or_else(|| panic!("no data server of this set on port {port}"))
    }

    fn server_mut(&mut self, port: u16) -> &mut RedisServer {
        let port = self.behind_gate(port);
        self.data
            .iter_mut()
            .find(|server| server.port() == port)
            .unwrap_or_else(|| panic!("no data server of this set on port {port}"))
    }

    /// The port of the primary, as the first answering Sentinel reports it
    /// (`SENTINEL GET-MASTER-ADDR-BY-NAME`).
    pub fn primary(&self) -> u16 {
        self.sentinels
            .iter()
            .filter(|sentinel| sentinel.is_answering())
            .find_map(|sentinel| reported_primary(sentinel).ok())
            .expect("a Sentinel that reports the primary")
    }

    /// The port of the data server that is not the primary.
    pub fn replica(&self) -> u16 {
        let primary = self.behind_gate(self.primary());
        self.data
            .iter()
            .map(RedisServer::port)
            .find(|&port| port != primary)
            .map(|port| self.gate_of(port))
            .expect("two data servers")
    }

    /// The port of the data server that the Sentinels know as `port`.
    fn behind_gate(&self, port: u16) -> u16 {
        self.gates
            .iter()
            .find(|gate| gate.port() == port)
            .map_or(port, Gate::upstream)
    }

    /// The port the Sentinels know the data server on `port` by.
    fn gate_of(&self, port: u16) -> u16 {
        self.gates
            .iter()
            .find(|gate| gate.upstream() == port)
            .map_or(port, Gate::port)
    }

    /// Cuts the primary off from the Sentinels and the replica (a set started with
    /// [`SentinelSet::start_partitionable`]) and returns its port: its gate closes their
    /// connections and refuses new ones, while clients of the test still reach it as before.
    /// It goes on believing it is the primary; the Sentinels count it down after
    /// [`SentinelSet::DOWN_AFTER`] and promote the replica.
    pub fn partition_primary(&self) -> u16 {
        let primary = self.primary();
        self.gates
            .iter()
            .find(|gate| gate.port() == primary)
            .expect("a partitionable set")
            .cut_off(PEER_SOURCE);
        primary
    }

    /// Ends the partition: the Sentinels reach the old primary again, and make it a replica of
    /// the new one four hello periods (8 s) after they see it report itself master.
    pub fn heal_partition(&self) {
        assert!(!self.gates.is_empty(), "a partitionable set");
        for gate in &self.gates {
            gate.open();
        }
    }

    /// Fails over on request (`SENTINEL FAILOVER`, retried while a Sentinel answers that no
    /// replica is ready yet), waits until every answering Sentinel reports the new primary and
    /// it says it is a master, then makes the old primary, if it runs, a replica of the new one
    /// (`REPLICAOF`, which the Sentinels would send only once it had reported itself master for
    /// four hello periods, 8 s) and waits until it has synced. Returns the new primary's port.
    pub fn failover(&self) -> u16 {
        let old = self.primary();
        self.wait("SENTINEL FAILOVER to be accepted", || {
            let sentinel = self
                .sentinels
                .iter()
                .find(|sentinel| sentinel.is_answering())
                .ok_or("no Sentinel answers")?;
            sentinel.query::<()>(redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME))
        });
        let new = self.wait_primary_changed(old);
        let old_primary = self.server(old);
        if old_primary.is_answering() {
            let () = old_primary
                .query(redis::cmd("REPLICAOF").arg("127.0.0.1").arg(new))
                .unwrap_or_else(|error| panic!("REPLICAOF: {error}"));
            self.wait_replicated();
        }
        new
    }

    /// Asks the Sentinel at `index` alone to fail over (`SENTINEL FAILOVER`, retried while it
    /// answers that no replica is ready yet) and returns the old primary's port at once. The
    /// other Sentinels hear of the new primary only by gossip (every 2 s), and the old primary
    /// stays a writable primary until the Sentinels convert it (eight seconds later) or
    /// [`SentinelSet::demote`] does: the window in which clients that follow a late Sentinel
    /// could still write to it.
    pub fn request_failover(&self, index: usize) -> u16 {
        let old = self.primary();
        let sentinel = &self.sentinels[index];
        self.wait("SENTINEL FAILOVER to be accepted", || {
            sentinel.query::<()>(redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME))
        });
        old
    }

    /// Makes the data server on `old` a replica of the current primary (`REPLICAOF`) and waits
    /// until it has synced: what the Sentinels do to a former primary some seconds after a
    /// failover.
    pub fn demote(&self, old: u16) {
        let new = self.wait_primary_changed(old);
        let () = self
            .server(old)
            .query(redis::cmd("REPLICAOF").arg("127.0.0.1").arg(new))
            .unwrap_or_else(|error| panic!("REPLICAOF: {error}"));
        self.wait_replicated();
    }

    /// Waits until every answering Sentinel reports the same primary other than `old`, and that
    /// server says it is a master; returns its port. For a failover the Sentinels start on
    /// their own, as after [`SentinelSet::kill_primary`].
    pub fn wait_primary_changed(&self, old: u16) -> u16 {
        self.wait(
            &format!("the Sentinels to promote a primary other than {old}"),
            || {
                let mut reported = None;
                for sentinel in self.sentinels.iter().filter(|s| s.is_answering()) {
                    let port = reported_primary(sentinel)?;
                    if port == old || reported.is_some_and(|seen| seen != port) {
                        return Err(format!("port {} reports {port}", sentinel.port()));
                    }
                    reported = Some(port);
                }
                let new = reported.ok_or("no Sentinel answers")?;
                let info: String = self
                    .server(new)
                    .query(redis::cmd("INFO").arg("replication"))?;
                match field(&info, "role") {
                    Some("master") => Ok(new),
                    role => Err(format!("{new} reports role {role:?}")),
                }
            },
        )
    }

    /// Kills the primary (SIGKILL) and returns its port. The Sentinels fail over on their own
    /// once it has been down for [`SentinelSet::DOWN_AFTER`] and they have elected a leader;
    /// [`SentinelSet::wait_primary_changed`] waits for that.
    pub fn kill_primary(&mut self) -> u16 {
        let primary = self.primary();
        self.server_mut(primary).stop();
        primary
    }

    /// Freezes the primary (SIGSTOP) and returns its port. The Sentinels fail over on their own
    /// once it has not answered for [`SentinelSet::DOWN_AFTER`]. Resumed
    /// ([`RedisServer::resume`]), it reports itself master until the Sentinels make it a replica
    /// of the new primary, four hello periods (8 s) after they first see it do so;
    /// [`SentinelSet::wait_replicated`] waits for that and for its sync.
    pub fn freeze_primary(&self) -> u16 {
        let primary = self.primary();
        self.server(primary).pause();
        primary
    }

    /// Starts a killed data server again on its port, empty (as a server without persistence
    /// comes back), and makes it a replica of the current primary at once (`REPLICAOF`), so that
    /// the Sentinels never see an empty master among the replicas they may promote.
    /// [`SentinelSet::wait_replicated`] waits until it has synced.
    pub fn start_again(&mut self, port: u16) {
        let primary = self.primary();
        assert_ne!(
            primary, port,
            "the Sentinels still count {port} as the primary"
        );
        let announced = self.gate_of(self.behind_gate(port));
        let gated = announced != self.behind_gate(port);
        let server = self.server_mut(port);
        server.start_again();
        if gated {
            let () = server
                .query(
                    redis::cmd("CONFIG")
                        .arg("SET")
                        .arg("replica-announce-port")
                        .arg(announced),
                )
                .unwrap_or_else(|error| panic!("CONFIG SET: {error}"));
        }
        let () = server
            .query(redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary))
            .unwrap_or_else(|error| panic!("REPLICAOF: {error}"));
    }

    /// Freezes the replica (SIGSTOP) and cuts its replication link on the primary
    /// (`CLIENT KILL TYPE replica`), so that nothing the primary acknowledges from now on
    /// reaches the replica: SIGSTOP alone would not do, since what the primary sends while the
    /// replica is stopped waits in the replica's socket and is applied when it resumes. If the
    /// primary still runs when the replica resumes, the replica reconnects and catches up.
    ///
    /// The Sentinels promote a replica only if its link went down at most ten times
    /// [`SentinelSet::DOWN_AFTER`] before the primary did; a replica resumed after the primary
    /// was killed counts its link as down from when it resumes.
    pub fn pause_replica(&self) {
        let replica = self.replica();
        let primary = self.primary();
        self.server(replica).pause();
        let _: redis::Value = self
            .server(primary)
            .query(redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica"))
            .unwrap_or_else(|error| panic!("CLIENT KILL TYPE replica: {error}"));
    }

    /// Lets the replica paused by [`SentinelSet::pause_replica`] run again (SIGCONT).
    pub fn resume_replica(&self) {
        let paused = self
            .data
            .iter()
            .find(|server| server.is_paused())
            .expect("a paused replica");
        paused.resume();
    }

    /// Stops writes on the primary (`CLIENT PAUSE WRITE`), waits until the replica has applied
    /// everything the primary wrote ([`SentinelSet::wait_replicated`]), calls `look` with the
    /// primary and the replica, and lets writes go on (`CLIENT UNPAUSE`). While `look` runs both
    /// hold the same data, so that a test can compare their copies of a key that clients keep
    /// changing. Clients see a primary that holds their writes for that long.
    pub fn with_writes_paused<T>(&self, look: impl FnOnce(&RedisServer, &RedisServer) -> T) -> T {
        let (primary, replica) = (self.primary(), self.replica());
        // The pause ends on its own should the test fail before `CLIENT UNPAUSE`.
        let () = self
            .server(primary)
            .query(
                redis::cmd("CLIENT")
                    .arg("PAUSE")
                    .arg(SETTLE.as_millis() as u64)
                    .arg("WRITE"),
            )
            .unwrap_or_else(|error| panic!("CLIENT PAUSE WRITE: {error}"));
        self.wait_replicated();
        let seen = look(self.server(primary), self.server(replica));
        let () = self
            .server(primary)
            .query(redis::cmd("CLIENT").arg("UNPAUSE"))
            .unwrap_or_else(|error| panic!("CLIENT UNPAUSE: {error}"));
        seen
    }

    /// Waits until the replica replicates the current primary with its link up and has applied
    /// everything the primary had written when the wait began (its offset reaches the primary's
    /// `master_repl_offset`).
    pub fn wait_replicated(&self) {
        let (primary, replica) = match self.sentinels.is_empty() {
            // While the Sentinels start, the first data server is the primary.
            true => (
                self.gate_of(self.data[0].port()),
                self.gate_of(self.data[1].port()),
            ),
            false => (self.primary(), self.replica()),
        };
        let info: String = self
            .server(primary)
            .query(redis::cmd("INFO").arg("replication"))
            .unwrap_or_else(|error| panic!("INFO replication: {error}"));
        let target: u64 = field(&info, "master_repl_offset")
            .and_then(|offset| offset.parse().ok())
            .expect("master_repl_offset in INFO replication");
        self.wait(
            &format!("the replica on {replica} to catch up with {primary} at offset {target}"),
            || {
                let info: String = self
                    .server(replica)
                    .query(redis::cmd("INFO").arg("replication"))?;
                let field = |name: &str| field(&info, name).unwrap_or("?");
                let offset: u64 = field("slave_repl_offset").parse().unwrap_or(0);
                let caught_up = field("role") == "slave"
                    && field("master_port") == primary.to_string()
                    && field("master_link_status") == "up"
                    && offset >= target;
                match caught_up {
                    true => Ok(()),
                    false => Err(format!(
                        "role:{} master_port:{} master_link_status:{} slave_repl_offset:{offset}",
                        field("role"),
                        field("master_port"),
                        field("master_link_status")
                    )),
                }
            },
        );
    }
}

/// The primary's port as `sentinel` reports it.
fn reported_primary(sentinel: &RedisServer) -> Result<u16, String> {
    let address: Vec<String> = sentinel.query(
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER_NAME),
    )?;
    address
        .get(1)
        .and_then(|port| port.parse().ok())
        .ok_or_else(|| format!("port {}: primary {address:?}", sentinel.port()))
}

/// The value after `name` in a flat `[name, value, name, value, ...]` reply.
fn pair<'a>(fields: &'a [String], name: &str) -> Option<&'a str> {
    fields
        .chunks(2)
        .find(|chunk| chunk[0] == name)
        .and_then(|chunk| chunk.get(1))
        .map(String::as_str)
}
