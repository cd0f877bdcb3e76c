//! A real Redis Cluster on loopback, for tests: masters and their replicas as `redis-server`
//! processes (`--cluster-enabled yes`, a short node timeout), joined by
//! `redis-cli --cluster create`, all killed on drop. It can fail a replica over, move a slot
//! between masters, pause, resume, kill and restart nodes, and cut a replica off its master.
//!
//! Nodes are named by their client port. Every wait has a deadline and fails the test saying what
//! it last saw; helpers that change the topology return once every answering node agrees on it.

mod migrate;
mod slot;
mod view;

use std::collections::HashMap;
use std::time::Duration;

pub use slot::{slot, SLOTS};
pub use view::{ClusterNode, Role};

use crate::info::field;
use crate::redis_server::{Launch, Mode};
use crate::wait::wait_for;
use crate::RedisServer;

/// How long a wait for the cluster to settle may take before the test fails.
const SETTLE: Duration = Duration::from_secs(30);

/// A Redis Cluster of real processes on loopback, killed on drop.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

/// How [`RedisCluster::failover`] asks a replica to take over (`CLUSTER FAILOVER [option]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failover {
    /// With its master's agreement: the master stops writes until the replica has caught up, so
    /// nothing acknowledged is lost. Needs the master to answer.
    Coordinated,
    /// Without the master (`FORCE`): the replica does not wait to catch up, but a majority of
    /// masters must vote for it.
    Force,
    /// Without any agreement (`TAKEOVER`): the replica bumps the epoch and takes the slots.
    Takeover,
}

impl RedisCluster {
    /// How long a node may fail to answer before the cluster counts it as down and a replica
    /// takes its place (`cluster-node-timeout`).
    pub const NODE_TIMEOUT: Duration = Duration::from_millis(2_000);

    /// Starts `masters` masters (at least 3) with `replicas_per_master` replicas each, and waits
    /// until every node says `cluster_state:ok`, all agree on the slots and every replica's link
    /// to its master is up. The usual shape is `RedisCluster::start(3, 1)`.
    pub fn start(masters: usize, replicas_per_master: usize) -> RedisCluster {
        assert!(masters >= 3, "a Redis Cluster needs at least 3 masters");
        let count = masters * (1 + replicas_per_master);
        let settings = [
            "--cluster-enabled yes",
            "--cluster-config-file nodes.conf",
            &format!("--cluster-node-timeout {}", Self::NODE_TIMEOUT.as_millis()),
            // A replica may always take over, however long its link was down.
            "--cluster-replica-validity-factor 0",
            // Replicas stay with their masters: the topology changes only when a test says so.
            "--cluster-allow-replica-migration no",
            // A replica's full sync starts at once (the default waits 5 s for more replicas).
            "--repl-diskless-sync-delay 0",
        ];
        let extra: Vec<String> = settings
            .iter()
            .flat_map(|setting| setting.split(' '))
            .map(str::to_owned)
            .collect();
        let nodes = (0..count)
            .map(|_| {
                RedisServer::launch(Launch {
                    mode: Mode::Plain,
                    cluster_bus: true,
                    extra: extra.clone(),
                })
            })
            .collect();
        let cluster = RedisCluster { nodes };
        let mut create: Vec<String> = vec!["--cluster".into(), "create".into()];
        create.extend(
            cluster
                .nodes
                .iter()
                .map(|node| format!("127.0.0.1:{}", node.port())),
        );
        create.extend([
            "--cluster-replicas".into(),
            replicas_per_master.to_string(),
            "--cluster-yes".into(),
        ]);
        if let Err(error) = crate::cli::run(&create, Duration::from_secs(60)) {
            panic!("redis-cli --cluster create failed: {error}");
        }
        cluster.wait_ok();
        cluster
    }

    /// The client ports of all nodes, in the order they were started.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    /// `redis://127.0.0.1:port` of every node, for a cluster client to start from.
    pub fn seed_urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The node on `port`, to connect to, monitor or read the log of.
    pub fn server(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|node| node.port() == port)
            .unwrap_or_else(|| panic!("no node of this cluster on port {port}"))
    }

    fn server_mut(&mut self, port: u16) -> &mut RedisServer {
        self.nodes
            .iter_mut()
            .find(|node| node.port() == port)
            .unwrap_or_else(|| panic!("no node of this cluster on port {port}"))
    }

    /// Every node with its role, master and slots, as the first answering node sees them (in
    /// the order the nodes were started).
    pub fn nodes(&self) -> Vec<ClusterNode> {
        let viewer = self
            .nodes
            .iter()
            .find(|node| node.is_answering())
            .expect("an answering node");
        let view = view_of(viewer).unwrap_or_else(|error| panic!("CLUSTER NODES: {error}"));
        let mut by_port: HashMap<u16, ClusterNode> =
            view.into_iter().map(|node| (node.port, node)).collect();
        self.ports()
            .iter()
            .filter_map(|port| by_port.remove(port))
            .collect()
    }

    /// The ports of the masters that serve slots.
    pub fn masters(&self) -> Vec<u16> {
        self.nodes()
            .iter()
            .filter(|node| node.role == Role::Master && !node.slots.is_empty())
            .map(|node| node.port)
            .collect()
    }

    /// The ports of the replicas of the master on `master`.
    pub fn replicas_of(&self, master: u16) -> Vec<u16> {
        self.nodes()
            .iter()
            .filter(|node| node.master == Some(master))
            .map(|node| node.port)
            .collect()
    }

    /// The port of the master serving `slot`.
    pub fn master_of_slot(&self, slot: u16) -> u16 {
        self.nodes()
            .iter()
            .find(|node| node.role == Role::Master && node.serves(slot))
            .map(|node| node.port)
            .unwrap_or_else(|| panic!("no master serves slot {slot}"))
    }

    /// The port of the master serving `key`'s slot ([`slot`]).
    pub fn master_for_key(&self, key: impl AsRef<[u8]>) -> u16 {
        self.master_of_slot(slot(key))
    }

    /// The node id of the node on `port`.
    pub fn id(&self, port: u16) -> String {
        self.server(port)
            .query(redis::cmd("CLUSTER").arg("MYID"))
            .unwrap_or_else(|error| panic!("CLUSTER MYID: {error}"))
    }

    /// Makes the replica on `replica` its master's master with `CLUSTER FAILOVER`, and waits until
    /// it says it is a master and the cluster is ok again ([`RedisCluster::wait_ok`]).
    pub fn failover(&self, replica: u16, how: Failover) {
        let node = self.nodes().into_iter().find(|node| node.port == replica);
        assert!(
            node.is_some_and(|node| node.role == Role::Replica),
            "the node on port {replica} is not a replica"
        );
        let mut command = redis::cmd("CLUSTER");
        command.arg("FAILOVER");
        match how {
            Failover::Coordinated => {}
            Failover::Force => {
                command.arg("FORCE");
            }
            Failover::Takeover => {
                command.arg("TAKEOVER");
            }
        }
        let () = self
            .server(replica)
            .query(&command)
            .unwrap_or_else(|error| panic!("CLUSTER FAILOVER {how:?}: {error}"));
        self.wait(
            &format!("the replica on port {replica} to become a master"),
            || match role(self.server(replica))? {
                Role::Master => Ok(()),
                Role::Replica => Err("role:slave".into()),
            },
        );
        self.wait_ok();
    }

    /// The configuration epoch of the node on `port` (`cluster_my_epoch` in `CLUSTER INFO`).
    pub fn config_epoch(&self, port: u16) -> u64 {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut self.server(port).connection())
            .expect("CLUSTER INFO");
        crate::info::field(&info, "cluster_my_epoch")
            .and_then(|epoch| epoch.parse().ok())
            .expect("a cluster_my_epoch field")
    }

    /// Freezes the node on `port` (SIGSTOP). Past [`RedisCluster::NODE_TIMEOUT`] the cluster
    /// counts it as down, and a replica of a paused master takes over.
    pub fn pause(&self, port: u16) {
        self.server(port).pause();
    }

    /// Freezes the replica on `replica` (SIGSTOP) and cuts its replication link on its master
    /// (`CLIENT KILL TYPE replica`), so that nothing the master acknowledges from now on reaches
    /// it: what the master sent to a replica that is merely stopped would wait in its socket and
    /// be applied when it resumes. Resumed ([`RedisCluster::resume`]) while its master runs, it
    /// reconnects and catches up.
    pub fn pause_replica(&self, replica: u16) {
        let master = self
            .nodes()
            .into_iter()
            .find(|node| node.port == replica)
            .and_then(|node| node.master)
            .unwrap_or_else(|| panic!("the node on port {replica} is not a replica"));
        self.pause(replica);
        let _: redis::Value = self
            .server(master)
            .query(redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica"))
            .unwrap_or_else(|error| panic!("CLIENT KILL TYPE replica: {error}"));
    }

    /// Lets a paused node run again (SIGCONT). A master that was replaced meanwhile turns into a
    /// replica of the node that took over; [`RedisCluster::wait_ok`] waits for that.
    pub fn resume(&self, port: u16) {
        self.server(port).resume();
    }

    /// Kills the node on `port` (SIGKILL). A replica of a killed master takes over after
    /// [`RedisCluster::NODE_TIMEOUT`]; [`RedisCluster::wait_ok`] waits for that.
    pub fn kill(&mut self, port: u16) {
        self.server_mut(port).stop();
    }

    /// Starts a killed node again on its port, empty but with its node id (its `nodes.conf`), as
    /// a node restarted without persistence rejoins.
    pub fn start_again(&mut self, port: u16) {
        self.server_mut(port).start_again();
    }

    /// Waits until every answering node says `cluster_state:ok` and knows every node, all of
    /// them agree on roles and slots, every slot is served by an answering master, and every
    /// replica of an answering master has its link up.
    pub fn wait_ok(&self) {
        self.wait("the cluster to settle", || self.check_ok());
    }

    /// [`wait_for`] with the settling deadline, failing with the end of every node's log.
    fn wait<T>(&self, what: &str, probe: impl FnMut() -> Result<T, String>) -> T {
        let logs = || self.nodes.iter().map(|node| node.log_tail(12)).collect();
        wait_for(what, SETTLE, probe, logs)
    }

    fn check_ok(&self) -> Result<(), String> {
        let answering: Vec<&RedisServer> = self
            .nodes
            .iter()
            .filter(|node| node.is_answering())
            .collect();
        let mut agreed: Option<(u16, Vec<Shape>)> = None;
        for node in &answering {
            let info: String = node.query(redis::cmd("CLUSTER").arg("INFO"))?;
            let field = |name: &str| field(&info, name).unwrap_or("?");
            if field("cluster_state") != "ok" {
                return Err(format!(
                    "port {}: cluster_state:{}",
                    node.port(),
                    field("cluster_state")
                ));
            }
            let known = field("cluster_known_nodes");
            if known != self.nodes.len().to_string() {
                return Err(format!("port {}: cluster_known_nodes:{known}", node.port()));
            }
            let mut shape: Vec<Shape> = view_of(node)?.into_iter().map(Shape::from).collect();
            shape.sort_by_key(|node| node.port);
            match &agreed {
                None => agreed = Some((node.port(), shape)),
                Some((first, seen)) if *seen != shape => {
                    return Err(format!(
                        "ports {first} and {} disagree: {seen:?} / {shape:?}",
                        node.port()
                    ))
                }
                Some(_) => {}
            }
        }
        let (_, shape) = agreed.ok_or("no node answers")?;
        let is_answering = |port: u16| answering.iter().any(|node| node.port() == port);
        for master in shape.iter().filter(|node| !node.slots.is_empty()) {
            if !is_answering(master.port) {
                return Err(format!(
                    "port {} is down but still serves slots",
                    master.port
                ));
            }
        }
        for node in &answering {
            let info: String = node.query(redis::cmd("INFO").arg("replication"))?;
            let field = |name: &str| field(&info, name).unwrap_or("?");
            if field("role") != "slave" {
                continue;
            }
            let master: u16 = field("master_port").parse().unwrap_or(0);
            if is_answering(master) && field("master_link_status") != "up" {
                return Err(format!(
                    "replica on port {}: link to {master} is {}",
                    node.port(),
                    field("master_link_status")
                ));
            }
        }
        Ok(())
    }
}

/// The part of a node's view that all nodes must agree on.
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    port: u16,
    role: Role,
    master: Option<u16>,
    slots: Vec<std::ops::RangeInclusive<u16>>,
}

impl From<ClusterNode> for Shape {
    fn from(node: ClusterNode) -> Shape {
        Shape {
            port: node.port,
            role: node.role,
            master: node.master,
            slots: node.slots,
        }
    }
}

/// `CLUSTER NODES` on `node`, parsed.
fn view_of(node: &RedisServer) -> Result<Vec<ClusterNode>, String> {
    let text: String = node.query(redis::cmd("CLUSTER").arg("NODES"))?;
    view::parse(&text)
}

/// The role `node` says it has (`INFO replication`).
fn role(node: &RedisServer) -> Result<Role, String> {
    let info: String = node.query(redis::cmd("INFO").arg("replication"))?;
    match field(&info, "role") {
        Some("master") => Ok(Role::Master),
        Some(_) => Ok(Role::Replica),
        None => Err(format!("port {}: no role in INFO replication", node.port())),
    }
}
