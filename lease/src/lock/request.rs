//! [`Request`]: one acquisition as its lock asks for it (the lock, the owner, the lease, the
//! wait's cancellation), and [`Acquired`], the hold it got before it has a guard.

use super::baton::Passed;
use super::core::Core;
use super::registry::Live;
use crate::backend::Place;
use crate::backend::Reserved;
use crate::cancel::Cancel;
use crate::policy::LeaseKind;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A hold just acquired, before its guard exists.
pub(crate) struct Acquired {
    pub(crate) hold: Arc<str>,
    pub(crate) id: String,
    pub(crate) token: Option<u64>,
    pub(crate) holds: u64,
    /// When the command that made it was sent, on the watchdog's clock.
    pub(crate) sent_at: Instant,
    /// Tokens the store reserved past a new hold's own, for this client's threads to hand on.
    pub(crate) reserved: Option<Reserved>,
    pub(crate) origin: Origin,
}

/// Where an acquired hold came from.
pub(crate) enum Origin {
    /// The store: a new hold of the owner's, taken or granted.
    Store,
    /// The store, re-entering this hold of the owner's, which has live guards here.
    Reentered(Live),
    /// Another thread of this client, which handed it on without the store.
    Passed(Passed),
}

/// The lock an acquisition is for, and on whose behalf.
pub(crate) struct Request<'a> {
    pub(crate) core: &'a Arc<Core>,
    pub(crate) place: &'a Arc<dyn Place>,
    pub(crate) owner: String,
    /// The default lease, renewed, or a fixed one.
    pub(crate) lease: LeaseKind,
    pub(crate) max_hold: Option<Duration>,
    /// Ends the wait from another thread.
    pub(crate) cancel: Option<&'a Cancel>,
}
