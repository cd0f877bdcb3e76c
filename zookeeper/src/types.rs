//! The client's plain types: how a session is opened (`Config`), what kind of node a create
//! makes (`CreateMode`), a node's metadata (`Stat`), what went wrong with a call (`Error`) and
//! what a session tells its event callback (`Event`).

use std::fmt;
use std::time::Duration;

/// How a session is opened: [`Config::new`], then the fields to change.
#[derive(Clone)]
#[non_exhaustive]
pub struct Config {
    /// The servers, `host:port` each: tried in a shuffled order, then in turn on reconnection.
    pub hosts: Vec<String>,
    /// A node every path is relative to (`"/app"`): prefixed to every path sent, stripped from
    /// every path received. `None` or `"/"` for none.
    pub chroot: Option<String>,
    /// The session timeout asked for; the server bounds it to its own minimum and maximum.
    pub session_timeout: Duration,
    /// How long one server is given to accept the TCP connection and answer the handshake.
    pub connect_timeout: Duration,
    /// `user:password`, sent as `addauth digest` after every handshake. Never logged nor shown.
    pub digest: Option<String>,
}

impl Config {
    /// A session on `hosts` (`host:port` each), with no chroot, a 10 s session timeout, 2 s to
    /// connect to one server, and no credentials.
    pub fn new(hosts: Vec<String>) -> Config {
        Config {
            hosts,
            chroot: None,
            session_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(2),
            digest: None,
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("hosts", &self.hosts)
            .field("chroot", &self.chroot)
            .field("session_timeout", &self.session_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("digest", &self.digest.as_ref().map(|_| "***"))
            .finish()
    }
}

/// What kind of node a create makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
pub enum CreateMode {
    /// Kept until deleted.
    Persistent,
    /// Deleted when the session ends.
    Ephemeral,
    /// The server appends a 10-digit counter, unique under the parent, to the name.
    PersistentSequential,
    /// Both: numbered, and deleted when the session ends.
    EphemeralSequential,
}

impl CreateMode {
    /// The create request's flags for this mode.
    pub(super) fn flags(self) -> i32 {
        match self {
            CreateMode::Persistent => 0,
            CreateMode::Ephemeral => 1,
            CreateMode::PersistentSequential => 2,
            CreateMode::EphemeralSequential => 3,
        }
    }

    /// Whether the server numbers the name.
    pub(super) fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential | CreateMode::EphemeralSequential
        )
    }
}

/// A node's metadata, as the server keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The zxid of the change that created the node.
    pub czxid: i64,
    /// The zxid of the change that last modified its data.
    pub mzxid: i64,
    /// When it was created, in milliseconds since the epoch (the server's clock).
    pub ctime: i64,
    /// When its data was last modified, likewise.
    pub mtime: i64,
    /// How many times its data changed.
    pub version: i32,
    /// How many times its children changed.
    pub cversion: i32,
    /// How many times its ACL changed.
    pub aversion: i32,
    /// The session that owns it, for an ephemeral node; 0 otherwise.
    pub ephemeral_owner: i64,
    /// How many bytes of data it holds.
    pub data_length: i32,
    /// How many children it has.
    pub num_children: i32,
    /// The zxid of the change that last modified its children.
    pub pzxid: i64,
}

/// What went wrong with a ZooKeeper call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The node (or, for a create, its parent) does not exist.
    #[error("no such node")]
    NoNode,
    /// A create's node exists already.
    #[error("the node exists already")]
    NodeExists,
    /// A delete's node has children.
    #[error("the node has children")]
    NotEmpty,
    /// A delete's version is not the node's.
    #[error("the node's version is not the one given")]
    BadVersion,
    /// The node's ACL does not allow the call.
    #[error("not allowed by the node's ACL")]
    NoAuth,
    /// The session is gone: its ephemeral nodes are deleted, and the `Session` is dead for good.
    #[error("the zookeeper session has expired")]
    SessionExpired,
    /// The request's connection broke before its reply (or the session had no connection until
    /// the call's deadline): it may or may not have been applied.
    #[error("the connection to zookeeper was lost before the reply")]
    ConnectionLoss,
    /// No reply by the caller's deadline: the request may or may not have been applied.
    #[error("no reply from zookeeper by the call's deadline")]
    Timeout,
    /// The session was closed by its owner.
    #[error("the zookeeper session is closed")]
    Closed,
    /// The server does not offer the operation: a TTL node on an ensemble whose servers run
    /// without `zookeeper.extendedTypesEnabled=true`.
    #[error("the zookeeper server does not offer this operation")]
    Unimplemented,
    /// A transaction ([`Session::multi`](crate::Session::multi)) failed at its operation
    /// `index` (from 0), with `error`: none of its operations was applied.
    #[error("operation {index} of the transaction failed ({error}); none was applied")]
    Aborted {
        /// The operation that failed, from 0.
        index: usize,
        /// Its error.
        error: Box<Error>,
    },
    /// Another error code from the server (`KeeperException.Code`); -5 (marshalling error) also
    /// for a request too large to send.
    #[error("zookeeper error code {0}")]
    Api(i32),
    /// The peer does not speak ZooKeeper: garbage, a frame of a wrong size, a reply out of turn.
    #[error("zookeeper protocol error: {0}")]
    Protocol(String),
    /// No server of the list could be reached, or none completed the handshake, and why.
    #[error("zookeeper unavailable: {0}")]
    Unavailable(String),
    /// A path refused before sending (or a chroot refused before connecting).
    #[error("invalid zookeeper path {0}")]
    BadPath(String),
}

/// What a session tells its event callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A watch fired: the node was created.
    NodeCreated(String),
    /// A watch fired: the node was deleted.
    NodeDeleted(String),
    /// A watch fired: the node's data changed.
    NodeDataChanged(String),
    /// A watch fired: a child of the node was created or deleted.
    NodeChildrenChanged(String),
    /// The connection was lost; the session may live on. Calls in flight failed with
    /// `ConnectionLoss`.
    Disconnected,
    /// Connected, the session kept: once when the session opens, then after each reconnection.
    Connected,
    /// The session is gone for good (the server said so, or no server was reached for a whole
    /// session timeout).
    Expired,
    /// Its owner closed the session.
    Closed,
}
