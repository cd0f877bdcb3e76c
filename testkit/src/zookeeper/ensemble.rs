//! Several ZooKeeper servers in one ensemble on loopback. Each node has three free ports (client,
//! quorum and election), a `server.i=127.0.0.1:QUORUM:ELECTION` line for every node in its
//! `zoo.cfg` and its `myid` (its index plus one) in its data directory.

use std::thread;
use std::time::{Duration, Instant};

use super::{await_nodes, default_settings, zookeeper_mode, Node, Ready, START_TIMEOUT};
use crate::redis_server::free_port;

/// What a node of an ensemble is waited for once a quorum runs.
const SERVING: Ready<'static> = Ready::Modes(&["leader", "follower"]);

/// n ZooKeeper servers in one ensemble on loopback (client, quorum and election ports all free),
/// killed on drop.
///
/// Nodes are named by their index, from 0; node `i` has `myid` `i + 1`. A node can be paused
/// (SIGSTOP), resumed, killed and started again with its data.
pub struct ZooKeeperEnsemble {
    nodes: Vec<Node>,
}

impl ZooKeeperEnsemble {
    /// `n` nodes (at least one) with the default settings, once a leader is elected and every
    /// node serves (1.5 to 3 s for three nodes on two busy cores).
    pub fn start(n: usize) -> Self {
        Self::start_with(n, &[])
    }

    /// `n` nodes with more `zoo.cfg` lines each, such as `"forceSync=no"`, after the defaults,
    /// which they override; `clientPort`, `dataDir` and the `server.i` lines are testkit's to
    /// set. Returns once a leader is elected and every node serves. A single node runs as an
    /// ensemble of one (`standaloneEnabled=false`), so that it says it is the leader.
    pub fn start_with(n: usize, extra_cfg: &[&str]) -> Self {
        assert!(n >= 1, "an ensemble has at least one node");
        // Another process may take one of the ports between the check and a server's bind.
        for _ in 0..5 {
            let ports: Vec<[u16; 3]> = (0..n)
                .map(|_| [free_port(None), free_port(None), free_port(None)])
                .collect();
            let servers: Vec<String> = ports
                .iter()
                .enumerate()
                .map(|(i, [_, quorum, election])| {
                    format!("server.{}=127.0.0.1:{quorum}:{election}", i + 1)
                })
                .collect();
            let mut nodes: Vec<Node> = ports
                .iter()
                .enumerate()
                .map(|(i, &[client, ..])| {
                    let node = Node::create(client, |dir| {
                        let mut settings = default_settings(dir, client);
                        if n == 1 {
                            settings.push("standaloneEnabled=false".to_owned());
                        }
                        settings.extend(servers.iter().cloned());
                        settings.extend(extra_cfg.iter().map(|line| (*line).to_owned()));
                        settings
                    });
                    node.set_myid(i + 1);
                    node
                })
                .collect();
            for node in &mut nodes {
                node.spawn();
            }
            let mut all: Vec<&mut Node> = nodes.iter_mut().collect();
            if await_nodes(&mut all, SERVING, "a ZooKeeper ensemble serving") {
                return ZooKeeperEnsemble { nodes };
            }
        }
        panic!("a ZooKeeper ensemble of {n} did not start on any of 5 sets of free ports");
    }

    /// How many nodes the ensemble has, running or not.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always `false`: an ensemble has at least one node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,...`: every node's client port, in order, as ZooKeeper
    /// clients take it.
    pub fn connect_string(&self) -> String {
        self.nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The client port of node `i`.
    pub fn port(&self, i: usize) -> u16 {
        self.nodes[i].port
    }

    /// The temporary directory of node `i`: `zoo.cfg`, `data/` (with `myid`), `zookeeper.log`
    /// and `zookeeper.out`.
    pub fn dir(&self, i: usize) -> &std::path::Path {
        self.nodes[i].dir()
    }

    /// The log of node `i` (`zookeeper.log` in its directory), appended to across restarts.
    pub fn log_path(&self, i: usize) -> std::path::PathBuf {
        self.nodes[i].log_path()
    }

    /// Whether the process of node `i` runs (paused or not): started, and not stopped since.
    pub fn is_running(&self, i: usize) -> bool {
        self.nodes[i].is_running()
    }

    /// The index of the leader: the one node whose `srvr` says `Mode: leader`. Waits up to 30 s
    /// for there to be exactly one, then fails the test with every node's mode and the end of
    /// their logs.
    pub fn leader(&self) -> usize {
        self.wait_for_leader(START_TIMEOUT).unwrap_or_else(|| {
            let modes: Vec<String> = (0..self.len())
                .map(|i| format!("node {i}: {}", self.mode_of(i)))
                .collect();
            let logs: String = self.nodes.iter().map(Node::log_tail).collect();
            panic!(
                "no single ZooKeeper leader within {START_TIMEOUT:?}; {}{logs}",
                modes.join(", ")
            )
        })
    }

    /// The index of the leader once exactly one node that runs and is not paused says
    /// `Mode: leader` on `srvr`, polled until `timeout`; `None` past it. Paused nodes are not
    /// asked (they would not answer); a leader paused and resumed may go on saying it leads
    /// until it notices it lost its followers (2 s), and while two nodes say so this waits.
    pub fn wait_for_leader(&self, timeout: Duration) -> Option<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            let leaders: Vec<usize> = (0..self.len())
                .filter(|&i| {
                    self.nodes[i].is_answering()
                        && zookeeper_mode(self.nodes[i].port).as_deref() == Some("leader")
                })
                .collect();
            if let [leader] = leaders[..] {
                return Some(leader);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Freezes node `i` (SIGSTOP): its connections stay open and nothing answers. A paused
    /// leader loses its followers after 2 s (`syncLimit`), and those elect a new leader if they
    /// are a majority; a paused follower is dropped by the leader as well. Clients of the node
    /// time out on their side and move to another node.
    pub fn pause(&self, i: usize) {
        self.nodes[i].pause();
    }

    /// Lets paused node `i` run again (SIGCONT); it rejoins the ensemble on its own.
    pub fn resume(&self, i: usize) {
        self.nodes[i].resume();
    }

    /// Kills node `i` (SIGKILL) and waits until it is gone.
    pub fn stop(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Starts node `i` again after [`ZooKeeperEnsemble::stop`], on the same ports with the same
    /// data, and waits until it serves, as follower or leader. That takes a quorum: if the
    /// nodes running and not paused, this one included, are not a majority, this only waits
    /// until the node is up (it answers `ruok`), and it serves once enough others are started
    /// again or resumed. Nothing happens if the node runs.
    pub fn start_again(&mut self, i: usize) {
        if self.nodes[i].is_running() {
            return;
        }
        let answering = (0..self.len())
            .filter(|&j| j == i || self.nodes[j].is_answering())
            .count();
        let ready = if answering > self.len() / 2 {
            SERVING
        } else {
            Ready::Up
        };
        self.nodes[i]
            .respawn(|node| await_nodes(&mut [node], ready, "a ZooKeeper node started again"));
    }

    /// What node `i` says its mode is, for a failure message.
    fn mode_of(&self, i: usize) -> String {
        let node = &self.nodes[i];
        if !node.is_running() {
            "stopped".to_owned()
        } else if !node.is_answering() {
            "paused".to_owned()
        } else {
            zookeeper_mode(node.port).unwrap_or_else(|| "not serving".to_owned())
        }
    }
}
