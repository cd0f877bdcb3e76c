//! Owner identities: a random 128-bit id per client, a small id per thread, and unique ids for
//! releases.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

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
