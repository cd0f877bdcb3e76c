//! The one rule by which the nodes of a queue hold its primitive, read in queue order: an
//! exclusive claim (a lock's, a fair lock's, a writer's) holds first in line; a reader holds
//! behind readers only (or behind a write hold of its own owner in this client: a downgrade); a
//! semaphore's contender holds behind contenders that take, with it, at most its permits. An
//! acquisition asks it what keeps its node from holding ([`Line::blocker`]); `inspect` and a
//! forced release ask which nodes hold ([`holding`]), by the same rule.

use super::paths::{self, Claim};
use crate::backend::Kind;

/// What keeps a contender from holding, of the nodes ahead of it in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Blocker {
    /// Nothing: it holds.
    None,
    /// The node at this index of the queue: looking again when it goes.
    Node(usize),
    /// Too many permits ahead, whichever goes: looking again when the queue changes.
    Any,
}

/// The nodes of a queue read so far, oldest first, as much of them as the rule needs.
#[derive(Debug, Default)]
pub(super) struct Line {
    /// How many nodes were read.
    read: usize,
    /// The permits the nodes read take, while every one of them is a semaphore's contender.
    taken: u64,
    /// The first node read that is not a semaphore's contender.
    first_not_taking: Option<usize>,
    /// The last node read that a reader cannot hold beside.
    last_not_reading: Option<usize>,
}

impl Line {
    /// Reads the next node, with its `claim`; `own_write`: it is a write hold of the owner the
    /// question is asked for, which a reader of that owner holds beside.
    pub(super) fn read(&mut self, claim: Option<Claim>, own_write: bool) {
        match claim {
            Some(Claim::Take(n)) => self.taken += u64::from(n),
            _ => {
                self.first_not_taking.get_or_insert(self.read);
            }
        }
        if claim != Some(Claim::Read) && !own_write {
            self.last_not_reading = Some(self.read);
        }
        self.read += 1;
    }

    /// What keeps a contender of `kind`, next in line after the nodes read, from holding.
    pub(super) fn blocker(&self, kind: Kind) -> Blocker {
        match kind {
            Kind::Semaphore { permits, take } => match self.first_not_taking {
                Some(index) => Blocker::Node(index),
                None if self.taken + u64::from(take) <= u64::from(permits) => Blocker::None,
                None => Blocker::Any,
            },
            Kind::Read => self.last_not_reading.map_or(Blocker::None, Blocker::Node),
            // A rate limiter is never placed on ZooKeeper (see `mod.rs`).
            Kind::Lock | Kind::Fair | Kind::Write | Kind::Leader | Kind::Latch | Kind::Limiter => {
                match self.read {
                    0 => Blocker::None,
                    read => Blocker::Node(read - 1),
                }
            }
        }
    }
}

/// The nodes of `queue` that hold its primitive as `kind` counts them (indices into `queue`):
/// those of `kind`'s claim that [`Line::blocker`] lets hold, the permits `kind` declares being
/// the semaphore's. A reader behind the write hold first in line holds if `owner_of` (the owner
/// a node's data names, `None` for a node gone) finds it the writer's own (a downgrade): owner ids
/// are unique to their holder, so the same owner is the same client.
///
/// # Errors
///
/// `owner_of`'s.
pub(super) fn holding<E>(
    kind: Kind,
    queue: &[(u64, String)],
    mut owner_of: impl FnMut(usize) -> Result<Option<String>, E>,
) -> Result<Vec<usize>, E> {
    // The nodes read, as anyone behind them sees them, and as the owner of the write hold
    // first in line sees them.
    let mut line = Line::default();
    let mut own = Line::default();
    let mut writer: Option<Option<String>> = None;
    let mut holding = Vec::new();
    for (index, (_, child)) in queue.iter().enumerate() {
        let claim = paths::claim(child);
        let contender = match (kind, claim) {
            (Kind::Semaphore { permits, .. }, Some(Claim::Take(take))) => {
                Some(Kind::Semaphore { permits, take })
            }
            (Kind::Read, Some(Claim::Read)) => Some(Kind::Read),
            (
                Kind::Lock | Kind::Fair | Kind::Write | Kind::Leader | Kind::Latch,
                Some(Claim::Exclusive),
            ) => Some(kind),
            _ => None,
        };
        if let Some(contender) = contender {
            let holds = line.blocker(contender) == Blocker::None
                || (own.blocker(contender) == Blocker::None && {
                    let first = match &writer {
                        Some(first) => first.clone(),
                        None => writer.insert(owner_of(0)?).clone(),
                    };
                    first.is_some() && first == owner_of(index)?
                });
            if holds {
                holding.push(index);
            }
        }
        line.read(claim, false);
        own.read(claim, index == 0 && claim == Some(Claim::Exclusive));
    }
    Ok(holding)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue of nodes with these claims, named as contenders name them.
    fn queue(claims: &[Claim]) -> Vec<(u64, String)> {
        claims
            .iter()
            .enumerate()
            .map(|(seq, claim)| {
                let prefix = paths::contender_prefix("", "g", *claim);
                (seq as u64, format!("{}{seq:010}", &prefix[1..]))
            })
            .collect()
    }

    fn blocker(kind: Kind, ahead: &[Claim]) -> Blocker {
        let mut line = Line::default();
        for claim in ahead {
            line.read(Some(*claim), false);
        }
        line.blocker(kind)
    }

    /// [`holding`] where every node's owner is the one `owners` names at its index.
    fn holding_of(kind: Kind, queue: &[(u64, String)], owners: &[&str]) -> Vec<usize> {
        let found: Result<Vec<usize>, ()> = holding(kind, queue, |index| {
            Ok(owners.get(index).map(|o| o.to_string()))
        });
        found.expect("no error")
    }

    /// [`holding`] where no owner may be asked.
    fn holding_unasked(kind: Kind, queue: &[(u64, String)]) -> Vec<usize> {
        let found: Result<Vec<usize>, usize> = holding(kind, queue, Err);
        found.expect("no owner asked")
    }

    #[test]
    fn an_exclusive_claim_waits_on_the_node_just_ahead() {
        assert_eq!(blocker(Kind::Lock, &[]), Blocker::None);
        assert_eq!(
            blocker(Kind::Write, &[Claim::Read, Claim::Read]),
            Blocker::Node(1)
        );
        assert_eq!(
            holding_unasked(Kind::Lock, &queue(&[Claim::Exclusive; 3])),
            [0]
        );
        assert!(holding_unasked(Kind::Write, &queue(&[Claim::Read, Claim::Exclusive])).is_empty());
    }

    #[test]
    fn a_reader_waits_on_the_last_writer_ahead_unless_it_is_its_own() {
        let ahead = [Claim::Read, Claim::Exclusive, Claim::Read];
        assert_eq!(blocker(Kind::Read, &ahead), Blocker::Node(1));
        let mut line = Line::default();
        line.read(Some(Claim::Exclusive), true);
        line.read(Some(Claim::Read), false);
        assert_eq!(line.blocker(Kind::Read), Blocker::None);
        let readers = queue(&[Claim::Read, Claim::Read, Claim::Exclusive, Claim::Read]);
        assert_eq!(holding_unasked(Kind::Read, &readers), [0, 1]);
        // A writer that also reads (a downgrade): its own reader holds, another's waits, and a
        // reader behind a writer that is not first waits whoever it is.
        let downgraded = queue(&[
            Claim::Exclusive,
            Claim::Read,
            Claim::Read,
            Claim::Exclusive,
            Claim::Read,
        ]);
        let owners = ["a", "b", "a", "a", "a"];
        assert_eq!(holding_of(Kind::Read, &downgraded, &owners), [2]);
        assert_eq!(holding_of(Kind::Write, &downgraded, &owners), [0]);
        // A writer whose node is gone (no owner) lets no reader in as its own.
        let gone: Result<Vec<usize>, ()> = holding(Kind::Read, &downgraded, |index| {
            Ok((index > 0).then(|| "a".into()))
        });
        assert!(gone.expect("no error").is_empty());
    }

    #[test]
    fn a_semaphore_contender_holds_while_the_permits_ahead_leave_it_room() {
        let semaphore = |take| Kind::Semaphore { permits: 3, take };
        let ahead = [Claim::Take(1), Claim::Take(1)];
        assert_eq!(blocker(semaphore(1), &ahead), Blocker::None);
        assert_eq!(blocker(semaphore(2), &ahead), Blocker::Any);
        assert_eq!(
            blocker(semaphore(1), &[Claim::Take(1), Claim::Exclusive]),
            Blocker::Node(1)
        );
        let takes = queue(&[
            Claim::Take(2),
            Claim::Take(1),
            Claim::Take(1),
            Claim::Take(1),
        ]);
        assert_eq!(holding_unasked(semaphore(1), &takes), [0, 1]);
        // Declaring more permits lets more of the same queue hold.
        let wider = Kind::Semaphore {
            permits: 5,
            take: 1,
        };
        assert_eq!(holding_unasked(wider, &takes), [0, 1, 2, 3]);
    }
}
