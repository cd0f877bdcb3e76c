//! The baton: a hold of this client on a plain lock, as its threads hand it on to one another
//! without the store. The hold stays what the store knows (its owner id, its id, its lease,
//! renewed by the watchdog); what changes from holder to holder is who the watchdog tells of its
//! loss, and the fencing token.
//!
//! Tokens must still rise strictly from holder to holder, here and across clients, whatever
//! becomes of this process. So a thread waiting behind a holder of its own client asks the store
//! to *reserve* tokens for that hold ([`TOKENS_RESERVED`] of them, while it waits, off the
//! holder's path): the store hands out the tokens after its counter and moves the counter past
//! them, so no later hold anywhere is handed one. A release hands the next reserved token to the
//! next holder; with none left, it goes through the store as before. A hold frozen or killed
//! with tokens unused leaves gaps in the sequence, never repeats.
//!
//! When a hold may be handed on at all (a plain lock, a store that counts tokens, the lease
//! renewed and the same for both holders, the last guard of the hold, the hold known valid for
//! a third of its lease more) is decided by the release (`release.rs`) and the watchdog; the
//! fairness between clients by the hand-off's lane (`handoff.rs`), where each pass counts as a
//! grant.

use crate::backend::{Place, Reserved, Rivals};
use crate::lost::Status;
use crate::state::LockState;
use crate::watchdog::Watched;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many tokens a waiter reserves for a holder of its client at a time: one store call per
/// this many passes at most, made by a waiter while the lock is held.
pub(crate) const TOKENS_RESERVED: u32 = 128;

/// Below this many tokens left, a waiter reserves a fresh block for the holder before it sleeps,
/// so that the hold is not released through the store for want of tokens while threads of this
/// client still wait for it. The tokens left unused then are skipped.
const REFILL_BELOW: u64 = TOKENS_RESERVED as u64 / 4;

/// A hold is handed on in memory only while it is known valid for this part of its lease more.
const PASS_MARGIN_DIVISOR: u32 = 3;

/// A hold handed on without the store, as its new holder takes it: the baton, the acquisition
/// the store knows (the one its last holder released here), the new holder's token, and its
/// link to the watchdog, which tells it of the hold's loss from now on.
pub(crate) struct Passed {
    pub(crate) baton: Arc<Baton>,
    pub(crate) id: String,
    pub(crate) token: u64,
    pub(crate) watched: Watched,
}

/// A hold kept here between two holders: its last holder released it while the next contender
/// was on its way (not yet sleeping on an offer), so it stays, renewed, for that contender to
/// take at its next step; the contention's end releases it through the store if none does.
pub(crate) struct Kept {
    pub(crate) place: Arc<dyn Place>,
    pub(crate) baton: Arc<Baton>,
    /// The acquisition the store knows.
    pub(crate) id: String,
    /// Its link to the watchdog, heard by nobody until it is taken.
    pub(crate) watched: Watched,
}

/// One hold of this client that its threads may hand on, shared by its successive holders and
/// by the client's registry while it stands.
pub(crate) struct Baton {
    /// The owner id the store knows the hold by: that of the thread that took it from the store.
    store_owner: Arc<str>,
    /// The hold's id.
    hold: Arc<str>,
    /// Its lease, which the watchdog renews.
    lease: Duration,
    /// The token the store knows the hold by: its first holder's.
    store_token: u64,
    state: Mutex<Standing>,
}

/// Who holds the baton now, and what is left of its tokens.
struct Standing {
    /// The owner id of the current holder.
    holder: Arc<str>,
    /// The current holder's token.
    token: u64,
    /// The current holder's standing with the watchdog.
    status: Arc<Status>,
    /// Tokens reserved and not handed out: `next..=last` (none when `next > last`).
    next: u64,
    last: u64,
    /// What the store saw of other clients' waiters when it reserved them.
    rivals: Rivals,
}

impl Baton {
    /// The baton of a hold just taken from the store by `holder` with `token`; no tokens
    /// reserved yet.
    pub(crate) fn new(
        holder: Arc<str>,
        hold: Arc<str>,
        lease: Duration,
        token: u64,
        status: Arc<Status>,
    ) -> Arc<Baton> {
        Arc::new(Baton {
            store_owner: Arc::clone(&holder),
            hold,
            lease,
            store_token: token,
            state: Mutex::new(Standing {
                holder,
                token,
                status,
                next: 1,
                last: 0,
                rivals: Rivals::Unknown,
            }),
        })
    }

    /// The owner id the store knows the hold by.
    pub(crate) fn store_owner(&self) -> &Arc<str> {
        &self.store_owner
    }

    /// The hold's id.
    pub(crate) fn hold(&self) -> &Arc<str> {
        &self.hold
    }

    /// Whether a holder asking for `lease`, renewed or not, may take the hold as it is: only
    /// with the same lease, renewed.
    pub(crate) fn fits(&self, renewed: bool, lease: Duration) -> bool {
        renewed && lease == self.lease
    }

    /// How much longer the hold must be known valid to be handed on: a third of its lease.
    pub(crate) fn pass_margin(&self) -> Duration {
        self.lease / PASS_MARGIN_DIVISOR
    }

    /// Whether a waiter may sleep on the baton rather than ask the store: a token is left to
    /// hand it, and the current holder is known valid at `now` (read on the watchdog's clock).
    pub(crate) fn can_pass(&self, now: Instant) -> bool {
        let state = self.state.lock();
        state.next <= state.last
            && state.status.lost().is_none()
            && now < state.status.valid_until()
    }

    /// Whether a waiter should reserve a fresh block before it sleeps (see [`REFILL_BELOW`]).
    pub(crate) fn running_low(&self) -> bool {
        let state = self.state.lock();
        state.last.saturating_add(1).saturating_sub(state.next) < REFILL_BELOW
    }

    /// Adds tokens the store reserved for the hold. Tokens at or below the current holder's
    /// are never taken (the store's counter only rises, so none are: this is a check).
    pub(crate) fn reserved(&self, reserved: Reserved) {
        let mut state = self.state.lock();
        if reserved.first > state.token && reserved.first <= reserved.last {
            state.next = reserved.first;
            state.last = reserved.last;
            state.rivals = reserved.rivals;
        }
    }

    /// The next reserved token, taken for a pass, and what the store saw of rivals when it
    /// reserved it; `None` if none is left.
    pub(crate) fn take_token(&self) -> Option<(u64, Rivals)> {
        let mut state = self.state.lock();
        if state.next > state.last {
            return None;
        }
        let token = state.next;
        state.next += 1;
        Some((token, state.rivals))
    }

    /// The baton went to `holder`, with `token`, who hears of the hold's loss through `status`.
    pub(crate) fn passed(&self, holder: Arc<str>, token: u64, status: Arc<Status>) {
        let mut state = self.state.lock();
        state.holder = holder;
        state.token = token;
        state.status = status;
    }

    /// Whether a token is left to hand on.
    pub(crate) fn has_tokens(&self) -> bool {
        let state = self.state.lock();
        state.next <= state.last
    }

    /// The hold is kept here, heard of through `status`, until a contender takes it.
    pub(crate) fn kept(&self, status: Arc<Status>) {
        self.state.lock().status = status;
    }

    /// Shows the store's view of the lock `state` as this client knows it: where the store
    /// shows this hold (its first holder's owner id and token), the current holder's owner id
    /// and token instead.
    pub(crate) fn show_holder(&self, state: &mut LockState) {
        if state.hold_token != Some(self.store_token) {
            return;
        }
        let Some(shown) = state
            .holders
            .iter_mut()
            .find(|(owner, _)| **owner == *self.store_owner)
        else {
            return;
        };
        let now = self.state.lock();
        shown.0 = now.holder.to_string();
        state.hold_token = Some(now.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn baton(token: u64, valid_for: Duration) -> Arc<Baton> {
        let status = Arc::new(Status::new(Instant::now() + valid_for));
        Baton::new(
            Arc::from("a"),
            Arc::from("h"),
            Duration::from_secs(30),
            token,
            status,
        )
    }

    fn reserved(first: u64, last: u64) -> Reserved {
        Reserved {
            first,
            last,
            rivals: Rivals::None,
        }
    }

    #[test]
    fn tokens_are_handed_out_in_order_and_only_those_reserved() {
        let baton = baton(7, Duration::from_secs(10));
        assert!(!baton.can_pass(Instant::now()), "nothing reserved yet");
        assert_eq!(baton.take_token(), None);
        baton.reserved(reserved(9, 11));
        assert!(baton.can_pass(Instant::now()));
        let taken: Vec<u64> = std::iter::from_fn(|| baton.take_token().map(|(t, _)| t)).collect();
        assert_eq!(taken, [9, 10, 11]);
        assert!(!baton.can_pass(Instant::now()), "all handed out");
    }

    #[test]
    fn a_reservation_at_or_below_the_current_token_is_refused() {
        let baton = baton(7, Duration::from_secs(10));
        baton.reserved(reserved(7, 20));
        assert_eq!(baton.take_token(), None);
        baton.passed(Arc::from("b"), 8, Arc::new(Status::new(Instant::now())));
        baton.reserved(reserved(8, 9));
        assert_eq!(baton.take_token(), None);
    }

    #[test]
    fn a_block_running_low_is_replaced_by_a_fresh_one_above_it() {
        let baton = baton(1, Duration::from_secs(10));
        assert!(baton.running_low(), "nothing reserved");
        baton.reserved(reserved(2, 1 + u64::from(TOKENS_RESERVED)));
        assert!(!baton.running_low());
        let spent = u64::from(TOKENS_RESERVED) - REFILL_BELOW + 1;
        for _ in 0..spent {
            baton.take_token().expect("reserved");
        }
        assert!(baton.running_low());
        let (last, _) = baton.take_token().expect("some left");
        baton.passed(Arc::from("b"), last, Arc::new(Status::new(Instant::now())));
        baton.reserved(reserved(500, 627));
        assert!(!baton.running_low());
        assert_eq!(
            baton.take_token().map(|(t, _)| t),
            Some(500),
            "the rest skipped"
        );
    }

    #[test]
    fn a_holder_no_longer_known_valid_is_not_slept_on() {
        let baton = baton(1, Duration::ZERO);
        baton.reserved(reserved(2, 40));
        assert!(!baton.can_pass(Instant::now()), "past its deadline");
    }
}
