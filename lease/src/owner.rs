//! Owner identities: a random 128-bit id per client, a small id per thread, and unique ids for
//! holds and acquisitions. An owner id is a credential: whoever knows it can act as that owner
//! (re-enter or release its holds in the store), so it is shown only where the holder
//! or an operator needs it.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

/// The longest owner id a caller may give, in bytes.
const MAX_OWNER: usize = 1024;

thread_local! {
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

/// This thread's id within the process: small, stable for the thread's life, never reused.
pub(crate) fn thread_id() -> u64 {
    THREAD.with(|id| *id)
}

/// 128 random bits from the operating system, in hex.
pub(crate) fn random_id() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| {
        Error::InvalidArgument(format!("no randomness for a client id: {error}"))
    })?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Checks an owner id a caller gave: not empty, not starting with `:` (the lock hash's own
/// fields do), not huge.
pub(crate) fn check_owner(owner: &str) -> Result<()> {
    if owner.is_empty() || owner.starts_with(':') || owner.len() > MAX_OWNER {
        return Err(Error::InvalidArgument(format!(
            "an owner id must be 1 to {MAX_OWNER} bytes and must not start with ':'"
        )));
    }
    Ok(())
}

/// Unique ids for holds and acquisitions: this client's id and a sequence number.
pub(crate) struct Ids {
    client: String,
    next: AtomicU64,
}

impl Ids {
    pub(crate) fn new(client: String) -> Ids {
        Ids {
            client,
            next: AtomicU64::new(1),
        }
    }

    pub(crate) fn client(&self) -> &str {
        &self.client
    }

    /// An id no other call of any client uses.
    pub(crate) fn next(&self) -> String {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}:{seq}", self.client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_ids_that_could_pass_for_lock_fields_are_refused() {
        assert!(check_owner("job-42").is_ok());
        for bad in ["", ":hold", ":a:1", &"o".repeat(MAX_OWNER + 1)] {
            assert!(check_owner(bad).is_err(), "{bad:.20}");
        }
    }
}
