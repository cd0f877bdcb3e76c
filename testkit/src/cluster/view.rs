//! A node's view of the cluster, read from `CLUSTER NODES`.

use std::ops::RangeInclusive;

/// A cluster node's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Serves slots (or would, if it had any).
    Master,
    /// Replicates a master.
    Replica,
}

/// One node as a cluster node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// The node's client port on 127.0.0.1.
    pub port: u16,
    /// Its 40-character node id.
    pub id: String,
    /// Whether it is a master or a replica.
    pub role: Role,
    /// The port of the master it replicates (replicas only).
    pub master: Option<u16>,
    /// The slots it serves (masters only), as ranges.
    pub slots: Vec<RangeInclusive<u16>>,
    /// Whether the cluster has agreed that it is down (`fail`; `fail?` is only a suspicion).
    pub failed: bool,
}

impl ClusterNode {
    /// Whether the node serves `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|range| range.contains(&slot))
    }
}

/// Parses `CLUSTER NODES` into its nodes, leaving out nodes still in the handshake (whose ids
/// are temporary) and slots in migration (`[slot->-id]`, `[slot-<-id]`).
pub(crate) fn parse(text: &str) -> Result<Vec<ClusterNode>, String> {
    struct Line<'a> {
        id: &'a str,
        port: u16,
        flags: Vec<&'a str>,
        master_id: &'a str,
        slots: Vec<RangeInclusive<u16>>,
    }
    let mut lines = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let malformed = || format!("a CLUSTER NODES line not understood: {line:?}");
        if fields.len() < 8 {
            return Err(malformed());
        }
        let flags: Vec<&str> = fields[2].split(',').collect();
        if flags.contains(&"handshake") || flags.contains(&"noaddr") {
            continue;
        }
        // `127.0.0.1:30001@40001` or `127.0.0.1:30001@40001,hostname`
        let port = fields[1]
            .split('@')
            .next()
            .and_then(|address| address.rsplit(':').next())
            .and_then(|port| port.parse().ok())
            .ok_or_else(malformed)?;
        let mut slots = Vec::new();
        for slot in fields[8..].iter().filter(|slot| !slot.starts_with('[')) {
            let range = match slot.split_once('-') {
                Some((first, last)) => first.parse().ok().zip(last.parse().ok()),
                None => slot.parse().ok().map(|one| (one, one)),
            };
            let (first, last) = range.ok_or_else(malformed)?;
            slots.push(first..=last);
        }
        lines.push(Line {
            id: fields[0],
            port,
            flags,
            master_id: fields[3],
            slots,
        });
    }
    let port_of = |id: &str| {
        lines
            .iter()
            .find(|line| line.id == id)
            .map(|line| line.port)
    };
    Ok(lines
        .iter()
        .map(|line| ClusterNode {
            port: line.port,
            id: line.id.to_owned(),
            role: if line.flags.contains(&"slave") {
                Role::Replica
            } else {
                Role::Master
            },
            master: (line.master_id != "-")
                .then(|| port_of(line.master_id))
                .flatten(),
            slots: line.slots.clone(),
            failed: line.flags.contains(&"fail"),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_masters_replicas_slots_and_migrations() {
        let text = "\
a1 127.0.0.1:20001@30001 myself,master - 0 0 1 connected 0-5460 [5461->-b2]
b2 127.0.0.1:20002@30002,host master - 0 1 2 connected 5461-10922 16000
c3 127.0.0.1:20003@30003 slave,fail a1 0 1 1 disconnected
d4 127.0.0.1:20004@30004 handshake - 0 1 0 connected
";
        let nodes = parse(text).expect("parsed");
        assert_eq!(nodes.len(), 3);
        assert_eq!(nodes[0].port, 20001);
        assert_eq!(nodes[0].role, Role::Master);
        assert_eq!(nodes[0].slots, vec![0..=5460]);
        assert!(nodes[1].serves(16000) && !nodes[1].serves(15999));
        assert_eq!(nodes[2].role, Role::Replica);
        assert_eq!(nodes[2].master, Some(20001));
        assert!(nodes[2].failed && !nodes[0].failed);
    }
}
