//! [`Write`] and [`Written`]: a write of the caller's own that the lock's store makes only while
//! a hold still holds ([`LeaseGuard::if_held`](crate::LeaseGuard::if_held)), in the store's own
//! terms, and what it returned. Plain data: each store runs the kind it can, and refuses the
//! others.

/// A write to the lock's own store, made by the store in one atomic step with a check that the
/// guard's hold still holds the lock (see [`LeaseGuard::if_held`](crate::LeaseGuard::if_held)).
/// Each store runs its own kind and refuses the others with
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Write {
    /// Redis (one server, Sentinel, Cluster): `script`, a Lua script's body, run by the server
    /// in the same script as the check, right after it, so that no other command runs between
    /// them. Inside it, `KEYS` are `keys` and `ARGV` are `args`, and what it returns is the
    /// write's reply ([`Written::Lua`]); an error it raises, or returns
    /// (`redis.error_reply`), is the call's error. On a Cluster every key must be in the lock's
    /// hash tag (`{name}`, the lock's name in braces), so that it lives in the lock's slot.
    ///
    /// Redis does not roll a script back: a script that fails after a write leaves that write
    /// (check before you write, as the crate's own scripts do). A check that finds the hold gone
    /// runs none of the script.
    Lua {
        /// The script's body (without `EVAL`'s own arguments).
        script: String,
        /// Its keys, its `KEYS[1]`, `KEYS[2]`, ...
        keys: Vec<String>,
        /// Its arguments, its `ARGV[1]`, `ARGV[2]`, ...
        args: Vec<String>,
    },
    /// ZooKeeper (feature `zookeeper`): these operations, in one transaction (`multi`) after a
    /// check that the hold's node still exists: all of them or none. Paths are as the client's
    /// session names them (under its chroot).
    #[cfg(feature = "zookeeper")]
    #[cfg_attr(docsrs, doc(cfg(feature = "zookeeper")))]
    Zk(Vec<zookeeper_blocking::Op>),
    /// PostgreSQL (feature `postgres`): `statement` (one statement, with `$1`, `$2`, ... for
    /// `params`, in text; `None` is NULL), in the same transaction as the check, which holds
    /// the lock's name until the transaction commits: all of it or none.
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    Sql {
        /// The statement.
        statement: String,
        /// Its parameters, in text.
        params: Vec<Option<String>>,
    },
}

impl Write {
    /// The store this kind of write is for, as messages name it.
    pub(crate) fn store(&self) -> &'static str {
        match self {
            Write::Lua { .. } => "Redis",
            #[cfg(feature = "zookeeper")]
            Write::Zk(_) => "ZooKeeper",
            #[cfg(feature = "postgres")]
            Write::Sql { .. } => "PostgreSQL",
        }
    }
}

/// What a [`Write`] made while the hold held returned, in its store's terms.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Written {
    /// What the Lua script returned.
    Lua(redis::Value),
    /// What each operation of the transaction did, in order.
    #[cfg(feature = "zookeeper")]
    #[cfg_attr(docsrs, doc(cfg(feature = "zookeeper")))]
    Zk(Vec<zookeeper_blocking::OpResult>),
    /// What the statement returned.
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    Sql {
        /// How many rows it inserted, updated, deleted or returned.
        rows_affected: u64,
        /// The rows it returned (`RETURNING`, or a `SELECT`), each column in text (`None` for
        /// NULL).
        rows: Vec<Vec<Option<String>>>,
    },
}

/// The refusal of a write of the wrong kind for the store at `address`, which runs `wanted`.
pub(crate) fn wrong_kind(write: &Write, address: &str, wanted: &str) -> crate::Error {
    crate::Error::InvalidArgument(format!(
        "a {} write cannot run on {address}, whose writes while held are {wanted}",
        write.store()
    ))
}
