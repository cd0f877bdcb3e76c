//! The numbers of ZooKeeper's protocol: the opcodes of requests, the xids reserved for replies
//! that answer no numbered call, the error codes of reply headers (and the error each stands
//! for), and the types of watch events.

use super::Error;

/// Opcodes of the requests this client sends.
pub(crate) mod op {
    pub(crate) const CREATE: i32 = 1;
    pub(crate) const DELETE: i32 = 2;
    pub(crate) const EXISTS: i32 = 3;
    pub(crate) const GET_DATA: i32 = 4;
    pub(crate) const SET_DATA: i32 = 5;
    pub(crate) const PING: i32 = 11;
    pub(crate) const GET_CHILDREN2: i32 = 12;
    pub(crate) const CHECK: i32 = 13;
    pub(crate) const MULTI: i32 = 14;
    pub(crate) const CREATE2: i32 = 15;
    pub(crate) const CREATE_TTL: i32 = 21;
    /// The type of a transaction's result that is an error.
    pub(crate) const ERROR: i32 = -1;
    pub(crate) const AUTH: i32 = 100;
    pub(crate) const SET_WATCHES: i32 = 101;
    pub(crate) const CLOSE_SESSION: i32 = -11;
}

/// The xids the protocol reserves: replies and notifications that answer no numbered call.
pub(crate) mod xid {
    pub(crate) const NOTIFICATION: i32 = -1;
    pub(crate) const PING: i32 = -2;
    pub(crate) const AUTH: i32 = -4;
    pub(crate) const SET_WATCHES: i32 = -8;
}

/// Error codes of the reply header (`KeeperException.Code`).
pub(crate) mod code {
    pub(crate) const OK: i32 = 0;
    /// A transaction's operation after the one that failed.
    pub(crate) const RUNTIME_INCONSISTENCY: i32 = -2;
    pub(crate) const MARSHALLING_ERROR: i32 = -5;
    /// An operation the server does not offer (a TTL node where its extended types are off).
    pub(crate) const UNIMPLEMENTED: i32 = -6;
    pub(crate) const NO_NODE: i32 = -101;
    pub(crate) const NO_AUTH: i32 = -102;
    pub(crate) const BAD_VERSION: i32 = -103;
    pub(crate) const NODE_EXISTS: i32 = -110;
    pub(crate) const NOT_EMPTY: i32 = -111;
    pub(crate) const SESSION_EXPIRED: i32 = -112;
}

/// The error a reply header's non-zero code stands for.
pub(crate) fn error_of(err: i32) -> Error {
    match err {
        code::NO_NODE => Error::NoNode,
        code::NODE_EXISTS => Error::NodeExists,
        code::NOT_EMPTY => Error::NotEmpty,
        code::BAD_VERSION => Error::BadVersion,
        code::NO_AUTH => Error::NoAuth,
        code::SESSION_EXPIRED => Error::SessionExpired,
        code::UNIMPLEMENTED => Error::Unimplemented,
        other => Error::Api(other),
    }
}

/// Event types of a notification (`Watcher.Event.EventType`).
pub(crate) mod event {
    pub(crate) const NODE_CREATED: i32 = 1;
    pub(crate) const NODE_DELETED: i32 = 2;
    pub(crate) const NODE_DATA_CHANGED: i32 = 3;
    pub(crate) const NODE_CHILDREN_CHANGED: i32 = 4;
}
