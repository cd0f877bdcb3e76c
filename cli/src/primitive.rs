//! Which primitive a command takes or looks at: a lock (the default), a fair lock, one of a
//! semaphore's permits, or a side of a read-write lock. The flags' help is `lease run`'s;
//! the commands that look at a name or remove it word it for what they do.

use clap::Args;
use redis_lease::{Client, Lock, Result};

#[derive(Args, Clone, Debug, Default)]
pub struct PrimitiveArgs {
    /// NAME is a semaphore of N permits: hold one of them (at most N holders at once, each with
    /// a lease of its own)
    #[arg(long, value_name = "N", conflicts_with_all = ["read", "write", "fair"])]
    pub permits: Option<u32>,
    /// NAME is a read-write lock: take its shared side (many readers at once, never with a
    /// writer)
    #[arg(long, conflicts_with_all = ["write", "fair"])]
    pub read: bool,
    /// NAME is a read-write lock: take its exclusive side (one writer, no readers); a waiting
    /// writer goes before readers that come after it
    #[arg(long, conflicts_with = "fair")]
    pub write: bool,
    /// NAME is a fair lock: holders take turns in the order they asked, across hosts
    #[arg(long)]
    pub fair: bool,
}

impl PrimitiveArgs {
    /// The lock the options name, as a [`Lock`] whose acquisitions take it.
    pub fn lock(&self, client: &Client, name: &str) -> Result<Lock> {
        if let Some(permits) = self.permits {
            return client.semaphore(name, permits)?.taking(1);
        }
        if self.read || self.write {
            let rw = client.read_write_lock(name)?;
            let side = if self.read {
                rw.read_lock()
            } else {
                rw.write_lock()
            };
            return Ok(side.clone());
        }
        if self.fair {
            return client.fair_lock(name);
        }
        client.lock(name)
    }

    /// What the primitive is called in messages: "lock", "semaphore", ...
    pub fn noun(&self) -> &'static str {
        match self {
            PrimitiveArgs {
                permits: Some(_), ..
            } => "semaphore",
            PrimitiveArgs { read: true, .. } => "read lock",
            PrimitiveArgs { write: true, .. } => "write lock",
            PrimitiveArgs { fair: true, .. } => "fair lock",
            _ => "lock",
        }
    }
}
