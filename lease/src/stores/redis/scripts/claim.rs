//! The claim of a grant whose reply was lost (`claim.lua`): the only Rust code that knows its
//! arguments and its reply.

use super::call::{Call, Lua};
use super::reply::{token, unexpected};
use crate::error::Result;
use crate::stores::redis::keys::LockKeys;
use redis::Value;
use std::sync::LazyLock;

/// The acquisition id under which the claimant of the grant of hold `hold` holds it, once it
/// claimed the grant: the same for every try, so that a claim sent again finds its own, and a
/// release of unknown outcome can name it.
pub(crate) fn claim_id(hold: &str) -> String {
    format!("{hold}:claimed")
}

static CLAIM: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("claim.lua")));

/// The claim, by `owner`, of the grant that made the hold `hold`, under the acquisition
/// [`claim_id`]`(hold)`.
pub(crate) fn claim(keys: &LockKeys, owner: &str, hold: &str) -> Call {
    Call::new(&CLAIM, &[&keys.lock])
        .arg(owner)
        .arg(hold)
        .arg(claim_id(hold))
}

/// The claimed hold's fencing token, or `None` if there was no grant to claim.
pub(crate) fn parse_claim(reply: &Value) -> Result<Option<u64>> {
    match reply {
        Value::Nil => Ok(None),
        other => token(other)
            .map(Some)
            .ok_or_else(|| unexpected("claim", reply)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{acquire, parse_release, release, Announce, Epoch, Grant, ReleaseReply};
    use super::*;
    use crate::stores::redis::conn::Conn;
    use std::time::{Duration, Instant};

    /// Takes `keys` as `holder`'s hold and releases it with a grant to `waiter` as the hold
    /// `hold`: the grant's token.
    fn granted(con: &mut Conn, keys: &LockKeys, hold: &str) -> u64 {
        let lease = Duration::from_secs(30);
        acquire(keys, "holder", lease, "h0", None, Epoch::None, false, None)
            .run(con, "k")
            .expect("free");
        let grant = Grant {
            owner: "waiter",
            hold,
            lease,
            reserve: 0,
        };
        let call = release(
            keys,
            "holder",
            "h0",
            "h0",
            Some(&grant),
            Announce::Global,
            Epoch::None,
        );
        let reply = call.run(con, "k").expect("released");
        match parse_release(&reply).expect("a reply") {
            ReleaseReply::Granted { token, .. } => token,
            other => panic!("not granted: {other:?}"),
        }
    }

    /// The withdrawal of the grant of `hold`, as its releaser writes it behind the release.
    fn withdraw(con: &mut Conn, keys: &LockKeys, hold: &str) {
        release(
            keys,
            "waiter",
            hold,
            hold,
            None,
            Announce::Global,
            Epoch::None,
        )
        .run(con, "k")
        .expect("runs");
    }

    fn claimed(con: &mut Conn, keys: &LockKeys, hold: &str) -> Option<u64> {
        let reply = claim(keys, "waiter", hold).run(con, "k").expect("runs");
        parse_claim(&reply).expect("a reply")
    }

    #[test]
    fn a_grant_is_claimed_or_withdrawn_whichever_comes_first_and_never_both() {
        let server = testkit::RedisServer::start();
        let endpoint = crate::stores::redis::conn::Endpoint::parse(&server.url()).expect("valid");
        let mut con =
            Conn::open(&endpoint, Instant::now() + Duration::from_secs(10)).expect("reachable");
        let keys = LockKeys::for_test("claims");
        let is_held = |con: &mut Conn| {
            crate::stores::redis::scripts::inspect(con, &keys)
                .expect("read")
                .is_held()
        };

        let token = granted(&mut con, &keys, "g1");
        assert_eq!(claimed(&mut con, &keys, "g1"), Some(token));
        assert_eq!(
            claimed(&mut con, &keys, "g1"),
            Some(token),
            "a claim sent again"
        );
        withdraw(&mut con, &keys, "g1");
        assert!(is_held(&mut con), "a claimed grant is not withdrawn");
        release(
            &keys,
            "waiter",
            "g1",
            &claim_id("g1"),
            None,
            Announce::Global,
            Epoch::None,
        )
        .run(&mut con, "k")
        .expect("released");
        assert!(!is_held(&mut con), "the claimant releases it");

        granted(&mut con, &keys, "g2");
        withdraw(&mut con, &keys, "g2");
        assert!(!is_held(&mut con), "an unclaimed grant is withdrawn");
        assert_eq!(
            claimed(&mut con, &keys, "g2"),
            None,
            "nothing left to claim"
        );
        assert!(!is_held(&mut con));
    }
}
