//! The Lua scripts, and the only Rust code that knows their arguments and replies. A script call
//! is a [`Call`]: EVALSHA of a script loaded once per server through [`redis::Script`], sent
//! again after loading the script where the server answers NOSCRIPT. The same `Call` is invoked
//! on one connection or written to several at once (RedLock's fan-out).
//!
//! Every script checks the keys and arguments it is given before its first write (see
//! `checks.lua`): a key of another type, a fencing counter that is not a whole number from 0 or
//! cannot rise any more, and a malformed lease fail the call with nothing changed.

mod claim;
mod direct;

pub(crate) use claim::{claim, claim_id, parse_claim};
pub(crate) use direct::{force_release, inspect};

use crate::conn::Conn;
use crate::error::{Error, Result};
use crate::fencing::Epoch;
use crate::keys::LockKeys;
use redis::{ConnectionLike, RedisResult, Script, Value};
use std::sync::LazyLock;
use std::time::Duration;

static CHECKS: &str = include_str!("checks.lua");
static ACQUIRE: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("acquire.lua")));
static RELEASE: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("release.lua")));
static RENEW: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("renew.lua")));

/// One script: its text (the checks, then the script's own) and its hash.
struct Lua {
    code: String,
    script: Script,
}

impl Lua {
    fn new(body: &str) -> Lua {
        let code = [CHECKS, body].concat();
        let script = Script::new(&code);
        Lua { code, script }
    }
}

/// One script call, ready to send: which script, and its EVALSHA command with keys and
/// arguments.
pub(crate) struct Call {
    lua: &'static Lua,
    command: redis::Cmd,
}

impl Call {
    fn new(lua: &'static Lua, keys: &[&str]) -> Call {
        let mut command = redis::cmd("EVALSHA");
        command.arg(lua.script.get_hash()).arg(keys.len()).arg(keys);
        Call { lua, command }
    }

    fn arg(mut self, arg: impl redis::ToRedisArgs) -> Call {
        self.command.arg(arg);
        self
    }

    /// The call as bytes to write to a connection.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.command.get_packed_command()
    }

    /// The call as bytes to write behind a call whose reply will never be read, on a
    /// connection about to be closed: `SCRIPT LOAD` first, so that a server that lost its
    /// scripts (a restart, `SCRIPT FLUSH`) runs it all the same, since no NOSCRIPT reply is ever
    /// read there to load it then.
    pub(crate) fn bytes_behind(&self) -> Vec<u8> {
        let mut bytes = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(&self.lua.code)
            .get_packed_command();
        bytes.extend(self.bytes());
        bytes
    }

    /// Loads the call's script on `con`, after the server answered NOSCRIPT.
    pub(crate) fn load(&self, con: &mut Conn) -> RedisResult<()> {
        self.lua.script.load(con).map(drop)
    }

    /// Runs the call on `con` and returns its reply; a refusal is an error.
    pub(crate) fn invoke(&self, con: &mut Conn) -> RedisResult<Value> {
        let bytes = self.bytes();
        match con.req_packed_command(&bytes)?.extract_error() {
            Err(error) if is_noscript(&error) => {
                self.load(con)?;
                con.req_packed_command(&bytes)?.extract_error()
            }
            other => other,
        }
    }

    /// [`Call::invoke`], with a refusal sorted into this crate's error (`key`: the lock's key,
    /// named in errors that do not name one).
    pub(crate) fn run(&self, con: &mut Conn, key: &str) -> Result<Value> {
        self.invoke(con)
            .map_err(|error| Error::from_redis(error, key))
    }

    /// [`Call::run`], followed on the same connection, in the same write, by `WAIT` for `acks`
    /// when there are any: the reply, and the shortfall if fewer replicas acknowledged the call
    /// than `acks` asks (the call ran on the primary all the same).
    pub(crate) fn run_acked(
        &self,
        con: &mut Conn,
        key: &str,
        acks: Option<Acks>,
    ) -> Result<(Value, Option<Shortfall>)> {
        let Some(acks) = acks else {
            return self.run(con, key).map(|reply| (reply, None));
        };
        let commands = [self.command.clone(), acks.wait()];
        let sorted = |error| Error::from_redis(error, key);
        let mut replies = con.exchange(&commands).map_err(sorted)?;
        if matches!(replies.first(), Some(Value::ServerError(error)) if error.code() == "NOSCRIPT")
        {
            self.load(con).map_err(sorted)?;
            replies = con.exchange(&commands).map_err(sorted)?;
        }
        let mut replies = replies.into_iter();
        let reply = replies.next().unwrap_or(Value::Nil).extract_error();
        let acked = replies.next().unwrap_or(Value::Nil).extract_error();
        let reply = reply.map_err(sorted)?;
        match acked.map_err(sorted)? {
            Value::Int(acked) => Ok((reply, acks.shortfall(u64::try_from(acked).unwrap_or(0)))),
            other => Err(unexpected("WAIT", &other)),
        }
    }
}

/// Fewer replicas acknowledged a call than required.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shortfall {
    pub(crate) acked: u64,
    pub(crate) wanted: u64,
}

impl Shortfall {
    /// The error a caller gets for it, about the lock (or leases) `name`.
    pub(crate) fn error(self, name: impl Into<String>) -> Error {
        Error::NotReplicated {
            name: name.into(),
            acked: self.acked,
            wanted: self.wanted,
        }
    }
}

/// How many replicas must acknowledge a write, and how long the server waits for them (`WAIT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Acks {
    pub(crate) replicas: u64,
    pub(crate) timeout: Duration,
}

impl Acks {
    /// The most replicas `WAIT` takes: it reads its count as a signed 64-bit number.
    pub(crate) const MAX_REPLICAS: u64 = i64::MAX as u64;

    fn wait(self) -> redis::Cmd {
        redis::cmd("WAIT")
            .arg(self.replicas)
            .arg(millis(self.timeout))
            .clone()
    }

    /// Waits for the replicas to acknowledge what the calls before on `con` wrote (`WAIT`): the
    /// shortfall if too few did, or the error if the server refused or did not answer (`key`
    /// as in [`Call::run`]).
    pub(crate) fn confirm(self, con: &mut Conn, key: &str) -> Result<Option<Shortfall>> {
        let sorted = |error| Error::from_redis(error, key);
        let replies = con.exchange(&[self.wait()]).map_err(sorted)?;
        match replies
            .into_iter()
            .next()
            .unwrap_or(Value::Nil)
            .extract_error()
        {
            Ok(Value::Int(acked)) => Ok(self.shortfall(u64::try_from(acked).unwrap_or(0))),
            Ok(other) => Err(unexpected("WAIT", &other)),
            Err(error) => Err(sorted(error)),
        }
    }

    /// The `WAIT` command as bytes, to follow calls written in one batch.
    pub(crate) fn wait_bytes(self) -> Vec<u8> {
        self.wait().get_packed_command()
    }

    /// The shortfall if `acked` replicas are not enough.
    pub(crate) fn shortfall(self, acked: u64) -> Option<Shortfall> {
        (acked < self.replicas).then_some(Shortfall {
            acked,
            wanted: self.replicas,
        })
    }
}

/// Whether the server answered that it does not have the script (after a restart or a
/// `SCRIPT FLUSH`).
pub(crate) fn is_noscript(error: &redis::RedisError) -> bool {
    error.code() == Some("NOSCRIPT")
}

/// A lease in whole milliseconds, as the scripts take it (at least 1).
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

fn unexpected(what: &str, reply: &Value) -> Error {
    Error::Protocol(format!("{what} replied {reply:?}"))
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

/// A fencing token, sent as a decimal string so that no double stands between it and Redis.
fn token(value: &Value) -> Option<u64> {
    match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

fn items(reply: &Value) -> &[Value] {
    match reply {
        Value::Array(items) => items,
        _ => &[],
    }
}

/// What an acquisition attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquire {
    /// Held now: a new hold (`holds` 1) or a re-entry (`holds` > 1), with its fencing token.
    Acquired { holds: u64, token: u64 },
    /// Held by another hold for about this long (`None`: no expiry set).
    Held { ttl: Option<Duration> },
}

/// An acquisition attempt: a new hold whose id (and first acquisition's) is `id`, or a re-entry
/// of the hold `reenter` under the acquisition `id`.
pub(crate) fn acquire(
    keys: &LockKeys,
    owner: &str,
    lease: Duration,
    id: &str,
    reenter: Option<&str>,
    epoch: Epoch,
) -> Call {
    Call::new(&ACQUIRE, &[&keys.lock, &keys.fence, &keys.epoch])
        .arg(millis(lease))
        .arg(owner)
        .arg(id)
        .arg(reenter.unwrap_or(""))
        .arg(epoch.arg())
}

pub(crate) fn parse_acquire(reply: &Value) -> Result<Acquire> {
    let fields = items(reply);
    match fields.iter().map(int).collect::<Vec<_>>().as_slice() {
        [Some(1), Some(holds), _] if *holds >= 1 => match token(&fields[2]) {
            Some(token) => Ok(Acquire::Acquired {
                holds: *holds as u64,
                token,
            }),
            None => Err(unexpected("acquire", reply)),
        },
        [Some(0), Some(ttl)] => Ok(Acquire::Held {
            ttl: u64::try_from(*ttl).ok().map(Duration::from_millis),
        }),
        _ => Err(unexpected("acquire", reply)),
    }
}

/// The release script's reply: what a release came to on one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReleaseReply {
    /// Applied; this many acquisitions of the hold are left (0: the lock was freed and
    /// announced).
    Applied { holds_left: u64 },
    /// Applied to the last acquisition, and the lock granted to the waiting owner with this
    /// token; `subscribers` connections were watching the lock's channel.
    Granted { token: u64, subscribers: u64 },
    /// This very release had been applied before (the call is a retry).
    AlreadyApplied,
    /// The hold does not hold the lock.
    NotOwner,
}

/// A waiting owner that a release may grant the lock to, as a new hold of id `hold`.
pub(crate) struct Grant<'a> {
    pub(crate) owner: &'a str,
    pub(crate) hold: &'a str,
    pub(crate) lease: Duration,
}

/// How a lock's channel is announced on: a global channel (`PUBLISH`), or a sharded one on the
/// master of its slot (`SPUBLISH`, Redis Cluster).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Announce {
    Global,
    Sharded,
}

impl Announce {
    pub(crate) fn command(self) -> &'static str {
        match self {
            Announce::Global => "publish",
            Announce::Sharded => "spublish",
        }
    }
}

/// The release of acquisition `id` of hold `hold`; at the hold's last, it frees the lock (and
/// announces it, as `announce` says) or grants it to `grant`'s owner.
pub(crate) fn release(
    keys: &LockKeys,
    owner: &str,
    hold: &str,
    id: &str,
    grant: Option<&Grant<'_>>,
    announce: Announce,
    epoch: Epoch,
) -> Call {
    Call::new(
        &RELEASE,
        &[&keys.lock, &keys.fence, &keys.released, &keys.epoch],
    )
    .arg(owner)
    .arg(hold)
    .arg(id)
    .arg(&keys.channel)
    .arg(grant.map_or("", |grant| grant.owner))
    .arg(grant.map_or("", |grant| grant.hold))
    .arg(grant.map_or(1, |grant| millis(grant.lease)))
    .arg(announce.command())
    .arg(epoch.arg())
}

pub(crate) fn parse_release(reply: &Value) -> Result<ReleaseReply> {
    let fields = items(reply);
    match fields.iter().map(int).collect::<Vec<_>>().as_slice() {
        [Some(-2)] => Ok(ReleaseReply::AlreadyApplied),
        [Some(-1)] => Ok(ReleaseReply::NotOwner),
        [Some(0), _, Some(subscribers)] => match token(&fields[1]) {
            Some(token) => Ok(ReleaseReply::Granted {
                token,
                subscribers: u64::try_from(*subscribers).unwrap_or(0),
            }),
            None => Err(unexpected("release", reply)),
        },
        [Some(left)] if *left >= 0 => Ok(ReleaseReply::Applied {
            holds_left: *left as u64,
        }),
        _ => Err(unexpected("release", reply)),
    }
}

/// One lease for [`renew`] to extend: the hold `hold` of the lock at `lock_key`.
pub(crate) struct Renewal<'a> {
    pub(crate) lock_key: &'a str,
    pub(crate) hold: &'a str,
    pub(crate) lease: Duration,
}

/// Extends every lease whose hold still holds its lock, in one call.
pub(crate) fn renew(leases: &[Renewal<'_>]) -> Call {
    let keys: Vec<&str> = leases.iter().map(|lease| lease.lock_key).collect();
    let mut call = Call::new(&RENEW, &keys);
    for lease in leases {
        call = call.arg(lease.hold).arg(millis(lease.lease));
    }
    call
}

/// One flag per lease, in order: whether it was extended.
pub(crate) fn parse_renew(reply: &Value, leases: usize) -> Result<Vec<bool>> {
    let flags: Option<Vec<bool>> = items(reply)
        .iter()
        .map(|flag| match int(flag) {
            Some(0) => Some(false),
            Some(1) => Some(true),
            _ => None,
        })
        .collect();
    match flags {
        Some(flags) if flags.len() == leases => Ok(flags),
        _ => Err(unexpected(&format!("renewal of {leases} leases"), reply)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Acquires and releases `keys` as a new hold on `con` with tokens of `epoch`.
    fn take(con: &mut Conn, keys: &LockKeys, id: &str, epoch: Epoch) -> Result<u64> {
        let reply = acquire(keys, "o", Duration::from_secs(5), id, None, epoch).run(con, "k")?;
        let Acquire::Acquired { token, .. } = parse_acquire(&reply)? else {
            panic!("held: {reply:?}");
        };
        let released = release(keys, "o", id, id, None, Announce::Global, Epoch::None);
        released.run(con, "k")?;
        Ok(token)
    }

    #[test]
    fn an_epoch_raises_the_tokens_and_an_epoch_behind_the_counter_gets_none() {
        let server = testkit::RedisServer::start();
        let endpoint = crate::conn::Endpoint::parse(&server.url()).expect("valid");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut con = Conn::open(&endpoint, deadline).expect("reachable");
        let keys = LockKeys::new("", "epochs").expect("valid");
        let span = 1u64 << 44;
        assert_eq!(take(&mut con, &keys, "a", Epoch::None).expect("free"), 1);
        assert_eq!(
            take(&mut con, &keys, "b", Epoch::Known(0)).expect("free"),
            2
        );
        // A new epoch starts at its first token, then counts up within it.
        assert_eq!(
            take(&mut con, &keys, "c", Epoch::Known(3)).expect("free"),
            3 * span
        );
        assert_eq!(
            take(&mut con, &keys, "d", Epoch::Known(3)).expect("free"),
            3 * span + 1
        );
        // Without an epoch the counter goes on; with one behind it, nothing is handed out.
        assert_eq!(
            take(&mut con, &keys, "e", Epoch::None).expect("free"),
            3 * span + 2
        );
        let behind = take(&mut con, &keys, "f", Epoch::Known(2));
        assert!(
            matches!(&behind, Err(Error::Unavailable(e)) if e.code() == Some("EPOCH")),
            "{behind:?}"
        );
        let state = crate::scripts::inspect(&mut con, &keys).expect("readable");
        assert!(!state.is_held(), "refused before any write: {state:?}");
        let past = take(&mut con, &keys, "g", Epoch::Known(Epoch::MAX + 1));
        assert!(matches!(&past, Err(Error::Refused(_))), "{past:?}");
        assert_eq!(
            take(&mut con, &keys, "h", Epoch::Known(Epoch::MAX)).expect("free"),
            Epoch::MAX * span
        );
    }

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn replies_are_read_exactly_and_anything_else_is_a_protocol_error() {
        let acquired = Value::Array(vec![Value::Int(1), Value::Int(1), bulk("9007199254740993")]);
        assert_eq!(
            parse_acquire(&acquired).expect("valid"),
            Acquire::Acquired {
                holds: 1,
                token: 9_007_199_254_740_993
            },
            "tokens above 2^53 stay exact"
        );
        let held = Value::Array(vec![Value::Int(0), Value::Int(-1)]);
        assert_eq!(
            parse_acquire(&held).expect("valid"),
            Acquire::Held { ttl: None }
        );
        let granted = Value::Array(vec![Value::Int(0), bulk("7"), Value::Int(2)]);
        assert_eq!(
            parse_release(&granted).expect("valid"),
            ReleaseReply::Granted {
                token: 7,
                subscribers: 2
            }
        );
        for junk in [
            Value::Nil,
            Value::Array(vec![Value::Int(1), Value::Int(1), bulk("-3")]),
            Value::Array(vec![Value::Int(1), Value::Int(0), bulk("3")]),
            Value::Array(vec![Value::Int(2)]),
        ] {
            assert!(parse_acquire(&junk).is_err(), "{junk:?}");
        }
        for junk in [
            Value::Nil,
            Value::Array(vec![Value::Int(-3)]),
            Value::Array(vec![Value::Int(0), bulk("x"), Value::Int(1)]),
        ] {
            assert!(parse_release(&junk).is_err(), "{junk:?}");
        }
        assert!(parse_renew(&Value::Array(vec![Value::Int(2)]), 1).is_err());
        assert!(parse_renew(&Value::Array(vec![Value::Int(1)]), 2).is_err());
    }
}
