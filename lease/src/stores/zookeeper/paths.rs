//! Where a lock lives in ZooKeeper's tree, and how its contenders' nodes are named.
//!
//! A lock named `jobs/nightly` is the persistent node `/lease/jobs/nightly` (under the client's
//! key prefix, and under the chroot if the client has one). Each contender creates one
//! ephemeral sequential child of it, `<guid>-lock-<sequence>`, as Curator and kazoo do: the
//! guid, unique to one contender's turn, lets a contender whose `create` reply was lost find its
//! node again instead of making a second one; the sequence, ten digits that ZooKeeper appends,
//! orders the contenders. The lowest sequence holds the lock.
//!
//! A read-write lock's readers are named `<guid>-read-<sequence>` (its writers as a lock's
//! contenders are), and a semaphore's contenders `<guid>-take<n>-<sequence>`, `n` the permits
//! they take: what a node claims is in its name, for every contender to read from one listing.

use crate::backend::Kind;
use crate::error::{Error, Result};

/// The node under which every lock lives.
const ROOT: &str = "/lease";

/// The node under which every leader election lives: apart from the locks, so that an election
/// and a lock of one name are two.
const ELECTIONS: &str = "/lease-elections";

/// The node under which every count-down latch lives: apart from the locks and elections.
const LATCHES: &str = "/lease-latches";

/// What separates a leader's owner id from the value it proclaimed, in its node's data (owner
/// ids of elections are the client's own, without it).
pub(super) const PROCLAIMED: char = '\0';

/// What separates an exclusive contender's guid from its sequence.
const MARK: &str = "-lock-";

/// What a contender's node claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Claim {
    /// The lock alone: a lock's, a fair lock's, a writer's.
    Exclusive,
    /// A share beside other readers.
    Read,
    /// This many of a semaphore's permits.
    Take(u32),
}

impl Claim {
    /// What an acquisition of `kind` claims.
    pub(super) fn of(kind: Kind) -> Claim {
        match kind {
            // A rate limiter is never placed on ZooKeeper (see `mod.rs`).
            Kind::Lock | Kind::Fair | Kind::Write | Kind::Leader | Kind::Latch | Kind::Limiter => {
                Claim::Exclusive
            }
            Kind::Read => Claim::Read,
            Kind::Semaphore { take, .. } => Claim::Take(take),
        }
    }

    /// The part of a node's name between its guid and its sequence.
    fn mark(self) -> String {
        match self {
            Claim::Exclusive => MARK.to_owned(),
            Claim::Read => "-read-".to_owned(),
            Claim::Take(n) => format!("-take{n}-"),
        }
    }

    /// The claim a mark (without its dashes) names.
    fn named(mark: &str) -> Option<Claim> {
        match mark {
            "lock" => Some(Claim::Exclusive),
            "read" => Some(Claim::Read),
            _ => mark
                .strip_prefix("take")
                .and_then(|n| n.parse().ok())
                .filter(|&n| n > 0)
                .map(Claim::Take),
        }
    }
}

/// The node of the lock `name` (with the client's key `prefix` before it), checked to be a path
/// ZooKeeper accepts: segments separated by single slashes, none empty, `.` or `..`, and no
/// character ZooKeeper refuses.
pub(super) fn lock_path(prefix: &str, name: &str) -> Result<String> {
    let relative = format!("{prefix}{name}");
    let refuse = |why: &str| {
        Err(Error::InvalidArgument(format!(
            "lock name {name:?} is not a ZooKeeper node name: {why}"
        )))
    };
    if relative.starts_with('/') || relative.ends_with('/') {
        return refuse("it must not start or end with '/'");
    }
    for segment in relative.split('/') {
        if segment.is_empty() {
            return refuse("it has an empty segment ('//')");
        }
        if segment == "." || segment == ".." {
            return refuse("'.' and '..' are not node names");
        }
    }
    if relative.chars().any(refused) {
        return refuse("it holds a control character");
    }
    Ok(format!("{ROOT}/{relative}"))
}

/// The node of the primitive `kind` named `name`: a lock's (see [`lock_path`]), or an
/// election's or a latch's, each under a root of its own.
pub(super) fn place_path(prefix: &str, name: &str, kind: Kind) -> Result<String> {
    let path = lock_path(prefix, name)?;
    Ok(match kind {
        Kind::Leader => format!("{ELECTIONS}{}", &path[ROOT.len()..]),
        Kind::Latch => format!("{LATCHES}{}", &path[ROOT.len()..]),
        _ => path,
    })
}

/// A contender node's data: its owner id, and what it proclaimed if it leads an election.
pub(super) fn node_data(data: &[u8]) -> (String, Option<String>) {
    let text = String::from_utf8_lossy(data);
    match text.split_once(PROCLAIMED) {
        Some((owner, value)) => (owner.to_owned(), Some(value.to_owned())),
        None => (text.into_owned(), None),
    }
}

/// Characters ZooKeeper refuses in a path (see its `PathUtils.validatePath`).
fn refused(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}')
}

/// The prefix the contender with `guid` creates its node under `lock`; ZooKeeper appends the
/// sequence.
pub(super) fn contender_prefix(lock: &str, guid: &str, claim: Claim) -> String {
    format!("{lock}/{guid}{}", claim.mark())
}

/// The guid part, claim and sequence of a contender's node name (a child name, not a path), if
/// it is one.
fn parse(child: &str) -> Option<(&str, Claim, u64)> {
    let (rest, digits) = child.rsplit_once('-')?;
    if digits.len() < 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (guid, mark) = rest.rsplit_once('-')?;
    Some((guid, Claim::named(mark)?, digits.parse().ok()?))
}

/// The sequence of a contender's node name, if it is one.
pub(super) fn sequence(child: &str) -> Option<u64> {
    parse(child).map(|(_, _, sequence)| sequence)
}

/// What a contender's node claims, if it is one.
pub(super) fn claim(child: &str) -> Option<Claim> {
    parse(child).map(|(_, claim, _)| claim)
}

/// Whether the child `child` is the node of the contender with `guid`.
pub(super) fn is_of(child: &str, guid: &str) -> bool {
    parse(child).is_some_and(|(own, _, _)| own == guid)
}

/// The contenders among `children`, in the order they hold the lock: by sequence. Children that
/// are not contenders' nodes are left out.
pub(super) fn queue(children: Vec<String>) -> Vec<(u64, String)> {
    let mut queue: Vec<(u64, String)> = children
        .into_iter()
        .filter_map(|child| sequence(&child).map(|seq| (seq, child)))
        .collect();
    queue.sort_unstable();
    queue
}

/// The last segment of a path.
pub(super) fn child_name(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, child)| child)
}

/// The parent of a path.
pub(super) fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("/", |(parent, _)| parent)
}

/// A zxid as a fencing token.
pub(super) fn token(zxid: i64) -> Result<u64> {
    u64::try_from(zxid)
        .ok()
        .filter(|&token| token > 0)
        .ok_or_else(|| Error::Protocol(format!("zookeeper: a node's creation zxid is {zxid}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_paths_under_the_root() {
        assert_eq!(lock_path("", "jobs").expect("valid"), "/lease/jobs");
        assert_eq!(
            lock_path("app/", "jobs/nightly").expect("valid"),
            "/lease/app/jobs/nightly"
        );
    }

    #[test]
    fn names_zookeeper_refuses_are_refused() {
        for name in ["/abs", "trailing/", "a//b", ".", "a/../b", "bad\u{0}"] {
            let error = lock_path("", name).expect_err("refused");
            assert!(
                matches!(error, Error::InvalidArgument(_)),
                "{name:?}: {error}"
            );
        }
    }

    #[test]
    fn contenders_are_ordered_by_sequence_whatever_their_guid() {
        let children = vec![
            "b-lock-0000000012".to_owned(),
            "a-lock-0000000011".to_owned(),
            "stray".to_owned(),
            "c-lock-12".to_owned(),
            "_c_9f-lock-0000000003".to_owned(),
        ];
        let queue = queue(children);
        let names: Vec<&str> = queue.iter().map(|(_, child)| child.as_str()).collect();
        assert_eq!(
            names,
            [
                "_c_9f-lock-0000000003",
                "a-lock-0000000011",
                "b-lock-0000000012"
            ]
        );
    }

    #[test]
    fn a_contender_finds_its_node_by_guid() {
        assert!(is_of("abc-lock-0000000001", "abc"));
        assert!(!is_of("abcd-lock-0000000001", "abc"));
        assert!(!is_of("abc-lock-x", "abc"));
        assert_eq!(
            contender_prefix("/lease/x", "g", Claim::Exclusive),
            "/lease/x/g-lock-"
        );
        assert!(is_of("g:1-take3-0000000007", "g:1"));
        assert_eq!(claim("g:1-take3-0000000007"), Some(Claim::Take(3)));
        assert_eq!(claim("g:1-read-0000000007"), Some(Claim::Read));
        assert_eq!(claim("g:1-take0-0000000007"), None);
        assert_eq!(claim("g:1-write-0000000007"), None);
        assert_eq!(child_name("/lease/x/g-lock-1"), "g-lock-1");
        assert_eq!(parent("/lease/x/g-lock-1"), "/lease/x");
    }
}
