//! The epoch fencing tokens are drawn in: what a connection carries from the deployment that
//! opened it to the scripts that hand out tokens. It imports nothing of the crate.

/// The epoch the fencing tokens of a server are drawn in. A token is its epoch times 2^44 plus
/// a count, and the scripts never hand out a token below the counter nor below its epoch's
/// first: a server promoted by a failover has a higher epoch than the one it replaces, so its
/// tokens are above every token the old one handed out, even those it never replicated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Epoch {
    /// No epochs: one server, whose counter only rises (tokens from 1).
    None,
    /// An epoch the client established: a Sentinel configuration epoch.
    Known(u64),
    /// The configuration epoch of the Redis Cluster node that runs the script, which it reads
    /// itself (`CLUSTER INFO`, noted in the lock's epoch note for as long as the node's
    /// replication id stays the same).
    Cluster,
}

impl Epoch {
    /// The largest epoch a token can carry (2^19 - 1): every token stays below 2^63.
    pub(crate) const MAX: u64 = (1 << 19) - 1;

    /// The epoch as the scripts take it: empty, a number, or `cluster`.
    pub(crate) fn arg(self) -> String {
        match self {
            Epoch::None => String::new(),
            Epoch::Known(epoch) => epoch.to_string(),
            Epoch::Cluster => "cluster".to_owned(),
        }
    }
}
