//! What a client knows of each lock it uses, in one registry keyed by lock name: whether a
//! thread of the client holds it, the holds its live guards hold (by owner), the hold its threads
//! may hand on (its baton), the releases whose outcome is unknown, how many of its threads
//! contend for it, and the hand-off's lane. It
//! changes only through the transitions below, each named for the event it records; nothing
//! else keeps a second copy.
//!
//! * A hold with live guards is re-entered by naming it; an owner never re-enters a hold it does
//!   not know of (an earlier hold that was lost, abandoned or never answered for lapses instead).
//! * A release of unknown outcome (the store did not answer in time), or a hold abandoned without a
//!   release, may still stand in the store, where it would keep the owner's next acquisition waiting
//!   until it lapses. So each is sent again (it names its hold and acquisition, and is applied at
//!   most once) before the same owner acquires the same lock again. A client keeps at most
//!   [`MAX_UNSETTLED`] of them: lock names that are never taken again (one per job, say) would
//!   otherwise keep theirs for ever. Past the bound the oldest is let go; its hold, if it still
//!   stands, lapses with its lease.
//!
//! An entry lives while any of this is so, and goes with the last of it. The hand-off's lane (its
//! run of grants) starts afresh once the lock is neither held nor contended for here.

use super::baton::{Baton, Kept};
use super::handoff::{Claiming, Lane, Offer};
use crate::backend::{Rivals, Scope};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The most releases a client keeps to send again.
pub(crate) const MAX_UNSETTLED: usize = 10_000;

/// A release to send again: acquisition `id` of hold `hold`, which the store knows as `owner`'s.
#[derive(Debug, Clone)]
pub(crate) struct Unsettled {
    pub(crate) owner: Arc<str>,
    pub(crate) hold: Arc<str>,
    pub(crate) id: String,
}

/// A hold with live guards, as its owner re-enters it.
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) hold: Arc<str>,
    /// The owner id the store knows the hold by: the owner's own, or for a hold handed on
    /// without the store, the one that took it from the store.
    pub(crate) store_owner: Arc<str>,
    /// The hold's baton, if its threads may hand it on.
    pub(crate) baton: Option<Arc<Baton>>,
}

/// What the client knows of one lock.
#[derive(Default)]
struct Entry {
    /// A thread of this client took the lock and has not freed it yet (as far as this client
    /// knows: the lease may have lapsed since).
    held_here: bool,
    /// Owner -> its latest hold and the number of that hold's live guards.
    live: HashMap<String, (Live, usize)>,
    /// The hold of this client that its threads may hand on, while it has live guards or is
    /// kept.
    baton: Option<Arc<Baton>>,
    /// The hold kept here between two holders.
    kept: Option<Kept>,
    /// Releases of unknown outcome, each with its owner and the number of its arrival.
    unsettled: Vec<(u64, String, Unsettled)>,
    /// Threads of this client in the local queue for the lock, the contender included.
    contenders: usize,
    lane: Lane,
}

impl Entry {
    /// One guard of `owner`'s hold `hold` is gone.
    fn guard_gone(&mut self, owner: &str, hold: &str) {
        if let Some((latest, guards)) = self.live.get_mut(owner) {
            if &*latest.hold == hold {
                *guards -= 1;
                if *guards == 0 {
                    self.live.remove(owner);
                }
            }
        }
    }

    /// Whether nothing is left to keep, once the lane is reset if it is idle.
    fn tidy(&mut self) -> bool {
        if self.held_here || self.contenders > 0 || self.kept.is_some() {
            return false;
        }
        self.lane = Lane::default();
        self.live.is_empty() && self.unsettled.is_empty()
    }
}

#[derive(Default)]
struct Locks {
    locks: HashMap<Scope, Entry>,
    /// Releases kept in all entries.
    unsettled: usize,
    arrivals: u64,
    /// Whether letting one go was logged as a warning already (later ones are debug records).
    warned: bool,
}

/// The registry: every lock name this client knows something of.
#[derive(Default)]
pub(crate) struct Registry {
    state: Mutex<Locks>,
}

impl Registry {
    /// The hold `owner` holds on `name` through a live guard, if any.
    pub(crate) fn reentrant(&self, name: &Scope, owner: &str) -> Option<Live> {
        let state = self.state.lock();
        let (live, _) = state.locks.get(name)?.live.get(owner)?;
        Some(live.clone())
    }

    /// A guard of `live`'s hold now exists: the lock is held here, and the hold is the one
    /// `owner` re-enters (a newer hold of the owner replaces an older one).
    pub(crate) fn acquired(&self, name: &Scope, owner: &str, live: &Live) {
        let mut state = self.state.lock();
        let entry = state.locks.entry(name.clone()).or_default();
        entry.held_here = true;
        if let Some(baton) = &live.baton {
            entry.baton = Some(Arc::clone(baton));
        }
        let known = entry
            .live
            .entry(owner.to_owned())
            .or_insert_with(|| (live.clone(), 0));
        if known.0.hold != live.hold {
            *known = (live.clone(), 0);
        }
        known.1 += 1;
    }

    /// A guard of `hold` is gone (its release is about to be sent, or it was abandoned): with
    /// the hold's last, its baton goes.
    pub(crate) fn guard_gone(&self, name: &Scope, owner: &str, hold: &str) {
        self.update(name, |entry| {
            entry.guard_gone(owner, hold);
            let hold_gone = !entry.live.values().any(|(live, _)| &*live.hold == hold);
            if hold_gone && entry.baton.as_ref().is_some_and(|b| &**b.hold() == hold) {
                entry.baton = None;
            }
        });
    }

    /// The last guard of `owner`'s hold `hold` handed it on to another thread of this client
    /// without the store, the store having seen `rivals` when it reserved the token: the lock
    /// stays held here, the baton stays, and the pass counts in the hand-off's run.
    pub(crate) fn passed(&self, name: &Scope, owner: &str, hold: &str, rivals: Rivals) {
        self.update(name, |entry| {
            entry.guard_gone(owner, hold);
            entry.lane.granted(rivals);
        });
    }

    /// The last guard of `owner`'s hold `hold` left it here for the contender on its way.
    pub(crate) fn keep(&self, name: &Scope, owner: &str, hold: &str, kept: Kept) {
        self.update(name, |entry| {
            entry.guard_gone(owner, hold);
            entry.kept = Some(kept);
        });
    }

    /// Takes the hold kept here, if there is one. Its baton stays: the contender that takes it
    /// holds it, or releases it through the store ([`Registry::baton_gone`]).
    pub(crate) fn take_kept(&self, name: &Scope) -> Option<Kept> {
        let mut state = self.state.lock();
        state.locks.get_mut(name)?.kept.take()
    }

    /// `baton`'s hold is released through the store: no thread of this client holds it.
    pub(crate) fn baton_gone(&self, name: &Scope, baton: &Arc<Baton>) {
        self.update(name, |entry| {
            if entry.baton.as_ref().is_some_and(|b| Arc::ptr_eq(b, baton)) {
                entry.baton = None;
            }
        });
    }

    /// Whether the guard of `owner` releasing `hold` is the hold's last here, with no release
    /// of it of unknown outcome: only then may it be handed on without the store.
    pub(crate) fn sole_guard(&self, name: &Scope, owner: &str, hold: &str) -> bool {
        let state = self.state.lock();
        let Some(entry) = state.locks.get(name) else {
            return false;
        };
        let sole = entry
            .live
            .get(owner)
            .is_some_and(|(live, guards)| &*live.hold == hold && *guards == 1);
        sole && !entry
            .unsettled
            .iter()
            .any(|(_, _, release)| &*release.hold == hold)
    }

    /// Threads of this client in the local queue for `name`, the contender included.
    pub(crate) fn contenders(&self, name: &Scope) -> usize {
        self.state
            .lock()
            .locks
            .get(name)
            .map_or(0, |entry| entry.contenders)
    }

    /// The hold of this client on `name` that its threads may hand on, if one stands.
    pub(crate) fn baton(&self, name: &Scope) -> Option<Arc<Baton>> {
        self.state.lock().locks.get(name)?.baton.clone()
    }

    /// A release of `owner` came back: the lock is still held here or not, and the release is
    /// kept to send again if its outcome is unknown.
    pub(crate) fn released(
        &self,
        name: &Scope,
        owner: &str,
        held_here: bool,
        unknown: Option<Unsettled>,
    ) {
        let mut state = self.state.lock();
        if let Some(release) = unknown {
            state.remember(name, owner, release);
        }
        if held_here {
            state.locks.entry(name.clone()).or_default().held_here = true;
        } else {
            state.update(name, |entry| entry.held_here = false);
        }
    }

    /// A release of `owner` (or the settling of a grant to it) got no answer: it is sent again
    /// before the owner's next acquisition of `name`.
    pub(crate) fn unanswered(&self, name: &Scope, owner: &str, release: Unsettled) {
        self.state.lock().remember(name, owner, release);
    }

    /// A guard of `owner`'s hold was abandoned: it is neither live nor held here any more, and
    /// its release is sent before the owner's next acquisition.
    pub(crate) fn abandoned(&self, name: &Scope, owner: &str, release: Unsettled) {
        self.guard_gone(name, owner, &release.hold);
        let mut state = self.state.lock();
        state.remember(name, owner, release);
        state.update(name, |entry| entry.held_here = false);
    }

    /// The lock was deleted whoever held it.
    pub(crate) fn force_freed(&self, name: &Scope) {
        self.update(name, |entry| {
            entry.held_here = false;
            entry.baton = None;
        });
    }

    /// Takes `owner`'s releases of `name` of unknown outcome, in the order they came, to send
    /// them again.
    pub(crate) fn take_unsettled(&self, name: &Scope, owner: &str) -> Vec<Unsettled> {
        let mut state = self.state.lock();
        if state.unsettled == 0 {
            return Vec::new();
        }
        let mut taken = Vec::new();
        state.update(name, |entry| {
            let (mine, others) = std::mem::take(&mut entry.unsettled)
                .into_iter()
                .partition(|(_, of, _)| of == owner);
            entry.unsettled = others;
            taken = mine;
        });
        state.unsettled -= taken.len();
        taken.into_iter().map(|(_, _, release)| release).collect()
    }

    /// A thread of this client enters the local queue for `name`.
    pub(crate) fn contending(&self, name: &Scope) {
        let mut state = self.state.lock();
        state.locks.entry(name.clone()).or_default().contenders += 1;
    }

    /// A contender left `offer` for releasers of this client.
    pub(crate) fn offered(&self, name: &Scope, offer: &Arc<Offer>) {
        self.update(name, |entry| entry.lane.offered(Arc::clone(offer)));
    }

    /// A thread of this client left the local queue for `name`, withdrawing its offer if any.
    /// The last to leave gets the hold kept here, if one is, to release.
    pub(crate) fn contention_over(&self, name: &Scope, offer: Option<&Arc<Offer>>) -> Option<Kept> {
        let mut left = None;
        self.update(name, |entry| {
            entry.contenders -= 1;
            if let Some(offer) = offer {
                entry.lane.withdrawn(offer);
            }
            if entry.contenders == 0 {
                left = entry.kept.take();
                if left.is_some() {
                    entry.baton = None;
                }
            }
        });
        left
    }

    /// What a release of `name` at its hold's last does about this client's contender.
    pub(crate) fn claim(&self, name: &Scope) -> Claiming {
        let mut state = self.state.lock();
        match state.locks.get_mut(name) {
            Some(entry) => entry.lane.claim(entry.contenders > 0),
            None => Claiming::Free,
        }
    }

    /// A release of `name` granted the lock to this client's contender.
    pub(crate) fn granted(&self, name: &Scope, rivals: Rivals) {
        self.update(name, |entry| entry.lane.granted(rivals));
    }

    /// Until when this client's contender for `name` lets other clients try first.
    pub(crate) fn yield_until(&self, name: &Scope) -> Option<Instant> {
        self.state.lock().locks.get(name)?.lane.yield_until()
    }

    /// Whether the lock is held here, as this client knows.
    #[cfg(test)]
    fn held_here(&self, name: &Scope) -> bool {
        self.state
            .lock()
            .locks
            .get(name)
            .is_some_and(|entry| entry.held_here)
    }

    fn update(&self, name: &Scope, change: impl FnOnce(&mut Entry)) {
        self.state.lock().update(name, change);
    }
}

impl Locks {
    /// Changes the entry of `name` if there is one, and drops it if nothing is left in it.
    fn update(&mut self, name: &Scope, change: impl FnOnce(&mut Entry)) {
        if let Some(entry) = self.locks.get_mut(name) {
            change(entry);
            if entry.tidy() {
                self.locks.remove(name);
            }
        }
    }

    fn remember(&mut self, name: &Scope, owner: &str, release: Unsettled) {
        if self.unsettled >= MAX_UNSETTLED {
            self.forget_oldest();
        }
        self.arrivals += 1;
        let arrival = self.arrivals;
        let entry = self.locks.entry(name.clone()).or_default();
        entry.unsettled.push((arrival, owner.to_owned(), release));
        self.unsettled += 1;
    }

    /// Lets the release that arrived first go.
    fn forget_oldest(&mut self) {
        let oldest = self
            .locks
            .iter()
            .filter_map(|(name, entry)| {
                entry
                    .unsettled
                    .first()
                    .map(|(arrival, ..)| (*arrival, name))
            })
            .min_by_key(|(arrival, _)| *arrival)
            .map(|(_, name)| name.clone());
        let Some(name) = oldest else {
            return;
        };
        self.update(&name, |entry| {
            entry.unsettled.remove(0);
        });
        self.unsettled -= 1;
        let level = if std::mem::replace(&mut self.warned, true) {
            log::Level::Debug
        } else {
            log::Level::Warn
        };
        log::log!(
            level,
            "more than {MAX_UNSETTLED} releases of unknown outcome: the oldest, of {name}, is \
             not sent again; its hold lapses with its lease"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Kind;

    fn scope(name: &str) -> Scope {
        Scope::new(name, Kind::Lock)
    }

    fn k() -> Scope {
        scope("k")
    }

    fn release(id: usize) -> Unsettled {
        Unsettled {
            owner: Arc::from("owner"),
            hold: Arc::from("hold"),
            id: id.to_string(),
        }
    }

    fn live(hold: &str) -> Live {
        Live {
            hold: Arc::from(hold),
            store_owner: Arc::from("o"),
            baton: None,
        }
    }

    fn reentered(registry: &Registry, owner: &str) -> Option<String> {
        registry
            .reentrant(&k(), owner)
            .map(|live| live.hold.to_string())
    }

    fn count(registry: &Registry) -> usize {
        registry.state.lock().unsettled
    }

    #[test]
    fn only_the_latest_hold_with_live_guards_is_reentered() {
        let registry = Registry::default();
        registry.acquired(&k(), "o", &live("h1"));
        registry.acquired(&k(), "o", &live("h1"));
        assert_eq!(reentered(&registry, "o").as_deref(), Some("h1"));
        registry.acquired(&k(), "o", &live("h2"));
        registry.guard_gone(&k(), "o", "h1");
        assert_eq!(
            reentered(&registry, "o").as_deref(),
            Some("h2"),
            "a stale guard leaves it"
        );
        registry.guard_gone(&k(), "o", "h2");
        assert_eq!(reentered(&registry, "o"), None);
        assert_eq!(reentered(&registry, "other"), None);
        assert!(registry.held_here(&k()), "until a release says otherwise");
        registry.released(&k(), "o", false, None);
        assert!(registry.state.lock().locks.is_empty(), "nothing left of it");
    }

    #[test]
    fn an_abandoned_hold_is_neither_live_nor_held_here_and_is_released_later() {
        let registry = Registry::default();
        registry.acquired(&k(), "o", &live("hold"));
        registry.abandoned(&k(), "o", release(1));
        assert_eq!(reentered(&registry, "o"), None);
        assert!(!registry.held_here(&k()));
        let taken = registry.take_unsettled(&k(), "o");
        assert_eq!(taken.len(), 1);
        assert!(registry.state.lock().locks.is_empty(), "nothing left of it");
    }

    #[test]
    fn the_store_is_bounded_and_lets_the_oldest_go() {
        let registry = Registry::default();
        for n in 0..MAX_UNSETTLED + 10 {
            registry.released(
                &scope(&format!("job/{n}")),
                "owner",
                false,
                Some(release(n)),
            );
        }
        assert_eq!(count(&registry), MAX_UNSETTLED);
        assert!(
            registry.take_unsettled(&scope("job/0"), "owner").is_empty(),
            "the oldest went"
        );
        let kept = registry.take_unsettled(&scope(&format!("job/{}", MAX_UNSETTLED + 9)), "owner");
        assert_eq!(kept.len(), 1);
        assert_eq!(count(&registry), MAX_UNSETTLED - 1);
    }

    #[test]
    fn releases_are_taken_per_lock_and_owner_in_order() {
        let registry = Registry::default();
        for n in 0..3 {
            registry.released(&scope("lock"), "a", false, Some(release(n)));
        }
        registry.released(&scope("lock"), "b", false, Some(release(9)));
        let ids: Vec<String> = registry
            .take_unsettled(&scope("lock"), "a")
            .into_iter()
            .map(|release| release.id)
            .collect();
        assert_eq!(ids, ["0", "1", "2"]);
        assert!(registry.take_unsettled(&scope("lock"), "a").is_empty());
        assert_eq!(count(&registry), 1);
    }
}
