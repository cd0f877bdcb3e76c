//! What the watchdog asks a backend's renewer, and what it answers: one call renews many leases
//! (per server), each named by the address its place gave the hold.

use std::time::Duration;

/// One lease to renew.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Renewal<'a> {
    /// Where the hold lives, as its place named it ([`Place::hold_address`](super::Place)).
    pub(crate) address: &'a str,
    /// The hold's id.
    pub(crate) hold: &'a str,
    pub(crate) lease: Duration,
}

/// What became of one lease in a renewal call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// Extended: its deadline moves.
    Yes,
    /// The store says the hold no longer holds (or, over several masters, too few still do).
    Gone,
    /// No answer that settles it (connection lost, timed out): try again before the deadline.
    Failed,
}

/// Where renewals go: each backend's own.
pub(crate) trait Renewer: Send + 'static {
    /// Renews the leases in one call (per server); one outcome per lease, in order.
    fn renew(&mut self, leases: &[Renewal<'_>]) -> Vec<Renewed>;
}
