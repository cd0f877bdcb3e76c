//! Redisson's lock scripts, as a peer whose cost on the server is measured beside this
//! workspace's (`script_costs`), and the commands its `RLock` and `RFencedLock` send for one
//! uncontended lock + unlock pair on one server.
//!
//! The Lua texts are copied verbatim from Redisson (<https://github.com/redisson/redisson>),
//! commit `66863978b4a92093b97c1f8c96f182a77e81d50e`: `RedissonLock.tryLockInnerAsync` and
//! `unlockInnerAsync` (`redisson/src/main/java/org/redisson/RedissonLock.java`) and
//! `RedissonFencedLock.tryLockInnerAsync` (`RedissonFencedLock.java` beside it), each string
//! joined as the Java source joins its pieces. Those scripts are Copyright (c) 2013-2026 Nikita
//! Koksharov, licensed under the Apache License, Version 2.0
//! (<http://www.apache.org/licenses/LICENSE-2.0>); they are used here unchanged, to run against a
//! test server, and are not part of any published crate.

/// `RedissonLock.tryLockInnerAsync`: KEYS = the lock; ARGV = lease ms, the lock name
/// (`<client id>:<thread id>`). Replies nil when taken, else the lock's PTTL.
pub const LOCK: &str = concat!(
    "if ((redis.call('exists', KEYS[1]) == 0) ",
    "or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then ",
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return nil; ",
    "end; ",
    "return redis.call('pttl', KEYS[1]);",
);

/// `RedissonFencedLock.tryLockInnerAsync`: KEYS = the lock, its token counter; ARGV = lease
/// ms, the lock name. Replies `{-1, token}` when taken, else `{pttl, -1}`.
pub const FENCED_LOCK: &str = concat!(
    "if (redis.call('exists', KEYS[1]) == 0 ",
    "or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then ",
    "local token = redis.call('incr', KEYS[2]);",
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return {-1, token}; ",
    "end; ",
    "return {redis.call('pttl', KEYS[1]), -1};",
);

/// `RedissonLock.unlockInnerAsync` (both locks release with it): KEYS = the lock, its channel,
/// the unlock latch of this request; ARGV = the unlock message (0), the lease ms, the lock name,
/// the publish command, the latch's life in ms. After its reply Redisson deletes the latch
/// (`RedissonBaseLock.unlockInnerAsync`), one more command per release.
pub const UNLOCK: &str = concat!(
    "local val = redis.call('get', KEYS[3]); ",
    "if val ~= false then ",
    "return tonumber(val);",
    "end; ",
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then ",
    "return nil;",
    "end; ",
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ",
    "if (counter > 0) then ",
    "redis.call('pexpire', KEYS[1], ARGV[2]); ",
    "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); ",
    "return 0; ",
    "else ",
    "redis.call('del', KEYS[1]); ",
    "redis.call(ARGV[4], KEYS[2], ARGV[1]); ",
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); ",
    "return 1; ",
    "end; ",
);

/// The lease Redisson's watchdog gives a lock (`lockWatchdogTimeout`, 30 s).
const LEASE_MS: u64 = 30_000;

/// The unlock latch's life: Redisson's default `(timeout + retry delay) * retry attempts`, with
/// its delay at the middle of its range ((3,000 + 2,000) * 4 ms).
const LATCH_MS: u64 = 20_000;

/// The commands of one uncontended lock + unlock pair of Redisson's `RLock` (or, `fenced`, its
/// `RFencedLock`) on the lock `name`, request `request`, the scripts run by their SHA1s: `lock`
/// ([`LOCK`], or [`FENCED_LOCK`] if `fenced`) and `unlock` ([`UNLOCK`]).
pub fn pair(
    fenced: bool,
    (lock, unlock): (&str, &str),
    name: &str,
    request: u64,
) -> Vec<redis::Cmd> {
    // Redisson's names: `prefixName` puts the lock's name in braces after a prefix.
    let owner = "c8d6ef27-5b0e-4b6c-9a8e-2f1d3c4b5a69:1";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let latch = format!("redisson_unlock_latch:{{{name}}}:{request:032x}");
    let mut take = redis::cmd("EVALSHA");
    if fenced {
        let token = format!("redisson_lock_token:{{{name}}}");
        take.arg(lock).arg(2).arg(name).arg(token);
    } else {
        take.arg(lock).arg(1).arg(name);
    }
    take.arg(LEASE_MS).arg(owner);
    let mut release = redis::cmd("EVALSHA");
    release
        .arg(unlock)
        .arg(3)
        .arg(name)
        .arg(channel)
        .arg(&latch)
        .arg(0)
        .arg(LEASE_MS)
        .arg(owner)
        .arg("publish")
        .arg(LATCH_MS);
    let delete = redis::cmd("DEL").arg(latch).clone();
    vec![take, release, delete]
}
