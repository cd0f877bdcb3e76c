//! One uncontended lock + unlock pair as each design sends it to the server, and what the server
//! spends on it (`INFO commandstats`: every command but the measurement's own; a script's time
//! includes the commands it calls), sent one call per round trip (the server idle between calls,
//! as a lock taken now and then meets it) or pipelined (the server never idle).

use crate::lock_peers::CHECK_AND_DELETE_LUA;
use crate::redisson;
use redis::Value;

const ACCESS: &str = include_str!("../../lease/src/stores/redis/scripts/access.lua");
const CHECKS: &str = include_str!("../../lease/src/stores/redis/scripts/checks.lua");
const HOLDS: &str = include_str!("../../lease/src/stores/redis/scripts/holds.lua");
const ACQUIRE: &str = include_str!("../../lease/src/stores/redis/scripts/acquire.lua");
const RELEASE: &str = include_str!("../../lease/src/stores/redis/scripts/release.lua");
const LOCK: &str = include_str!("../../lease/src/stores/redis/scripts/lock.lua");
const UNLOCK: &str = include_str!("../../lease/src/stores/redis/scripts/unlock.lua");

/// How many names the pairs go round.
const NAMES: u64 = 50;

/// How a design's pair is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Design {
    /// `SET NX PX`, then a check-and-delete script.
    Floor,
    /// Redisson's `RLock`: its lock and unlock scripts, and the latch's `DEL`.
    RedissonLock,
    /// Redisson's `RFencedLock`: the same with its fenced lock script.
    RedissonFenced,
    /// `redis-lease`'s common acquisition and release scripts, as the client sends them.
    Lease,
    /// `redis-lease`'s general scripts with every argument, as every pair was sent before the
    /// common ones had scripts of their own.
    General,
    /// [`Design::Lease`] with every ACL check answered "allowed" without asking the server.
    LeaseNoAcl,
    /// [`Design::Lease`]'s scripts as functions of a library (`FCALL`).
    LeaseFunctions,
    /// Two scripts that only return, with [`Design::Lease`]'s keys and arguments.
    Empty,
}

impl Design {
    /// Every design, in the order the tables list them.
    pub const ALL: [Design; 8] = [
        Design::Floor,
        Design::RedissonLock,
        Design::RedissonFenced,
        Design::Lease,
        Design::General,
        Design::LeaseNoAcl,
        Design::LeaseFunctions,
        Design::Empty,
    ];

    /// The name the tables print.
    pub fn name(self) -> &'static str {
        match self {
            Design::Floor => "raw floor: `SET NX PX` + check-and-delete script",
            Design::RedissonLock => "Redisson `RLock` (lock, unlock, latch `DEL`)",
            Design::RedissonFenced => "Redisson `RFencedLock` (the same, a token per hold)",
            Design::Lease => "**redis-lease**: `lock.lua` + `unlock.lua`",
            Design::General => "redis-lease before: `acquire.lua` + `release.lua`, shared prelude",
            Design::LeaseNoAcl => "`lock.lua` + `unlock.lua` without the ACL checks",
            Design::LeaseFunctions => "`lock.lua` + `unlock.lua` as Redis functions (`FCALL`)",
            Design::Empty => "two scripts that only return, the same arguments",
        }
    }
}

/// The scripts' texts of the general design: the shared functions, then each script.
fn general(body: &str) -> String {
    [ACCESS, CHECKS, HOLDS, body].concat()
}

/// `text` with every ACL check answered "allowed" without asking the server.
fn without_acl(text: &str) -> String {
    let allowed = "local function allowed() return true end\n";
    [allowed, &text.replace("redis.acl_check_cmd(", "allowed(")].concat()
}

/// The library of the functions design.
fn library() -> String {
    let function = |name: &str, body: &str| {
        format!("redis.register_function('{name}', function(KEYS, ARGV)\n{body}\nend)\n")
    };
    [
        "#!lua name=lease_costs\n",
        &function("lease_lock", LOCK),
        &function("lease_unlock", UNLOCK),
    ]
    .concat()
}

/// The SHA1s a design's pairs name, loaded on the server.
pub struct Loaded {
    design: Design,
    shas: Vec<String>,
}

fn load(con: &mut redis::Connection, text: &str) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(text)
        .query(con)
        .expect("SCRIPT LOAD")
}

/// Loads `design`'s scripts (or library) on `con`'s server.
pub fn prepare(con: &mut redis::Connection, design: Design) -> Loaded {
    let texts: Vec<String> = match design {
        Design::Floor => vec![CHECK_AND_DELETE_LUA.to_owned()],
        Design::RedissonLock => vec![redisson::LOCK.to_owned(), redisson::UNLOCK.to_owned()],
        Design::RedissonFenced => vec![
            redisson::FENCED_LOCK.to_owned(),
            redisson::UNLOCK.to_owned(),
        ],
        Design::Lease => vec![LOCK.to_owned(), UNLOCK.to_owned()],
        Design::General => vec![general(ACQUIRE), general(RELEASE)],
        Design::LeaseNoAcl => vec![without_acl(LOCK), without_acl(UNLOCK)],
        Design::LeaseFunctions => {
            let () = redis::cmd("FUNCTION")
                .arg("LOAD")
                .arg("REPLACE")
                .arg(library())
                .query::<String>(con)
                .map(drop)
                .expect("FUNCTION LOAD");
            vec![]
        }
        Design::Empty => vec!["return {1, 1, '1'}".to_owned(), "return {0}".to_owned()],
    };
    let shas = texts.iter().map(|text| load(con, text)).collect();
    Loaded { design, shas }
}

impl Loaded {
    /// The commands of pair `i`, in order.
    pub fn pair(&self, i: u64) -> Vec<redis::Cmd> {
        let n = i % NAMES;
        let id = format!("a{i:016x}");
        match self.design {
            Design::Floor => {
                let key = format!("costs{n}");
                vec![
                    redis::cmd("SET")
                        .arg(&key)
                        .arg(&id)
                        .arg("NX")
                        .arg("PX")
                        .arg(30_000)
                        .clone(),
                    redis::cmd("EVALSHA")
                        .arg(&self.shas[0])
                        .arg(1)
                        .arg(&key)
                        .arg(&id)
                        .clone(),
                ]
            }
            Design::RedissonLock | Design::RedissonFenced => redisson::pair(
                self.design == Design::RedissonFenced,
                (&self.shas[0], &self.shas[1]),
                &format!("costs{n}"),
                i,
            ),
            Design::General => general_pair(&self.shas, n, &id),
            Design::Lease | Design::LeaseNoAcl | Design::LeaseFunctions | Design::Empty => {
                let (call, lock, unlock) = match self.design {
                    Design::LeaseFunctions => ("FCALL", "lease_lock", "lease_unlock"),
                    _ => ("EVALSHA", self.shas[0].as_str(), self.shas[1].as_str()),
                };
                lease_pair(call, (lock, unlock), n, &id)
            }
        }
    }
}

/// The keys of `redis-lease`'s lock number `n` (no key prefix): the lock, the fencing counter,
/// the release log, the epoch note, the channel.
fn lease_keys(n: u64) -> [String; 5] {
    let lock = format!("{{costs{n}}}");
    let key = |suffix: &str| format!("{lock}{suffix}");
    [
        key(""),
        key(":fence"),
        key(":released"),
        key(":epoch"),
        key(":freed"),
    ]
}

/// A pair as the client sends it now: `lock.lua`'s and `unlock.lua`'s calls.
fn lease_pair(call: &str, (lock, unlock): (&str, &str), n: u64, id: &str) -> Vec<redis::Cmd> {
    let [key, fence, log, _, channel] = lease_keys(n);
    let owner = "5c0ffee15c0ffee15c0ffee15c0ffee1:1";
    vec![
        redis::cmd(call)
            .arg(lock)
            .arg(2)
            .arg(&key)
            .arg(&fence)
            .arg(30_000)
            .arg(owner)
            .arg(id)
            .clone(),
        redis::cmd(call)
            .arg(unlock)
            .arg(2)
            .arg(&key)
            .arg(&log)
            .arg(owner)
            .arg(id)
            .arg(id)
            .arg(&channel)
            .arg("publish")
            .clone(),
    ]
}

/// A pair as the client sent it before: `acquire.lua`'s and `release.lua`'s calls with every
/// argument.
fn general_pair(shas: &[String], n: u64, id: &str) -> Vec<redis::Cmd> {
    let [key, fence, log, epoch, channel] = lease_keys(n);
    let owner = "5c0ffee15c0ffee15c0ffee15c0ffee1:1";
    vec![
        redis::cmd("EVALSHA")
            .arg(&shas[0])
            .arg(3)
            .arg(&key)
            .arg(&fence)
            .arg(&epoch)
            .arg(30_000)
            .arg(owner)
            .arg(id)
            .arg("")
            .arg("")
            .arg("")
            .arg(0)
            .clone(),
        redis::cmd("EVALSHA")
            .arg(&shas[1])
            .arg(4)
            .arg(&key)
            .arg(&fence)
            .arg(&log)
            .arg(&epoch)
            .arg(owner)
            .arg(id)
            .arg(id)
            .arg(&channel)
            .arg("")
            .arg("")
            .arg(1)
            .arg("publish")
            .arg("")
            .arg(0)
            .clone(),
    ]
}

/// Fails on a reply that is an error: a design that does not run measures nothing.
fn check(design: Design, replies: &[Value]) {
    if let Some(error) = replies.iter().find_map(|reply| match reply {
        Value::ServerError(error) => Some(format!("{error:?}")),
        _ => None,
    }) {
        panic!("{}: {error}", design.name());
    }
}

/// The server's µs in every command since the last `CONFIG RESETSTAT` but the measurement's own.
pub fn server_usec(con: &mut redis::Connection) -> f64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .expect("INFO");
    let own = ["info", "config|resetstat", "script|load", "function|load"];
    stats
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter_map(|line| line.split_once(':'))
        .filter(|(command, _)| !own.contains(command))
        .filter_map(|(_, fields)| {
            fields
                .split(',')
                .find_map(|field| field.strip_prefix("usec="))
                .and_then(|usec| usec.parse::<f64>().ok())
        })
        .sum()
}

/// Resets the server's command statistics.
pub fn reset(con: &mut redis::Connection) {
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(con)
        .expect("RESETSTAT");
}

/// The server process's CPU time so far, in µs (`INFO cpu`: user and system, every thread).
pub fn server_cpu(con: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query(con).expect("INFO");
    info.lines()
        .filter_map(|line| line.split_once(':'))
        .filter(|(field, _)| matches!(*field, "used_cpu_sys" | "used_cpu_user"))
        .filter_map(|(_, seconds)| seconds.trim().parse::<f64>().ok())
        .sum::<f64>()
        * 1e6
}

/// What the server spent on a run, per pair: µs in the commands (`INFO commandstats`, wall
/// time, which counts the server's preemption by other processes) and µs of its CPU (`INFO
/// cpu`, which does not, but counts its I/O too).
#[derive(Clone, Copy, Debug)]
pub struct Spent {
    pub commands: f64,
    pub cpu: f64,
}

/// Runs `pairs` pairs of `loaded`'s design, `pipelined` in batches of 500 or each call on its
/// own round trip; what the server spent per pair.
pub fn run(con: &mut redis::Connection, loaded: &Loaded, pairs: u64, pipelined: bool) -> Spent {
    reset(con);
    let cpu = server_cpu(con);
    if pipelined {
        for batch in 0..pairs / 500 {
            let mut pipe = redis::pipe();
            for i in batch * 500..(batch + 1) * 500 {
                for command in loaded.pair(i) {
                    pipe.add_command(command);
                }
            }
            let replies: Vec<Value> = pipe.query(con).expect("the pairs");
            check(loaded.design, &replies);
        }
    } else {
        for i in 0..pairs {
            for command in loaded.pair(i) {
                let reply: Value = command.query(con).expect("a call");
                check(loaded.design, &[reply]);
            }
        }
    }
    let cpu = server_cpu(con) - cpu;
    Spent {
        commands: server_usec(con) / pairs as f64,
        cpu: cpu / pairs as f64,
    }
}
