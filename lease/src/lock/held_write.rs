//! A write of the caller's own that the lock's store makes only while a guard's hold still
//! holds ([`LeaseGuard::if_held`](super::LeaseGuard::if_held)): refused at once, without a call,
//! where the store cannot check a hold and write in one atomic step, or where the watchdog
//! already counts the hold lost; otherwise sent by the place, naming the hold as the store knows
//! it (a hold handed on in memory is still the store's hold of the thread that took it).

use super::release::Holding;
use crate::error::{Error, Result};
use crate::watchdog::Watched;
use crate::write::{Write, Written};

/// `write`, made while `holding`'s hold holds.
pub(crate) fn if_held(holding: &Holding, watched: &Watched, write: &Write) -> Result<Written> {
    let (place, core) = holding.place_and_core();
    let Some(writes) = place.writes() else {
        return Err(Error::InvalidArgument(format!(
            "writes while holding a {} are not offered on {}: no one call there can check the \
             hold and write",
            place.id().kind.label(),
            core.backend().address()
        )));
    };
    let not_held = || Error::NotOwner {
        name: holding.name().to_owned(),
    };
    if holding.is_lost(watched) {
        return Err(not_held());
    }
    let (owner, hold) = holding.store_hold();
    match writes.if_held(owner, hold, write, core.call_deadline())? {
        Some(written) => {
            log::debug!("lock {:?}: written while held", holding.name());
            Ok(written)
        }
        None => Err(not_held()),
    }
}
