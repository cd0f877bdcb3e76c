//! What an uncontended lock + unlock pair costs the server, script by script, and what the
//! designs weighed against today's scripts would cost: the same scripts as Redis functions
//! (`FCALL`, the shared functions defined once when the library is loaded instead of at every
//! call), without the ACL checks before the first write, and a leaner acquire script written for
//! the common case only (a plain lock, no epoch, no fairness, no re-entry); beside the raw floor
//! (`SET NX PX` and a check-and-delete script) and a script that only returns.
//!
//! Each design runs 50,000 pairs on 50 names, pipelined (so that the figure is the server's time
//! in the commands, not its I/O), three runs in turn; the figure is the server's time per pair in
//! the commands (`INFO commandstats`: a script's time includes the commands it calls).
//!
//! Run: `cargo run --release -p benches --bin script_costs` (`quick`: 2,000 pairs, one run).
#![allow(clippy::print_stdout)]

use benches::figures::{loadavg, median, Request};
use redis::Value;
use testkit::RedisServer;

const BATCH: usize = 500;

const CHECKS: &str = include_str!("../../../lease/src/stores/redis/scripts/checks.lua");
const HOLDS: &str = include_str!("../../../lease/src/stores/redis/scripts/holds.lua");
const ACQUIRE: &str = include_str!("../../../lease/src/stores/redis/scripts/acquire.lua");
const RELEASE: &str = include_str!("../../../lease/src/stores/redis/scripts/release.lua");

/// Every ACL check before a write answered "allowed" without asking the server: what the checks
/// cost (`denied` is shadowed for the code after it).
const NO_ACL: &str = "local function denied() return nil end\n";

/// The acquire script for the common case alone, as a prototype to measure (not shipped): the
/// same reply, checks of the lease, the lock's and the counter's types and the user's rules, and
/// writes as `acquire.lua` for a plain lock without epoch, fairness or re-entry.
const LEAN_ACQUIRE: &str = r#"
local lease = ARGV[1]
if not string.match(lease, '^[1-9]%d*$') or #lease > 12 then
  return redis.error_reply('ERR invalid lease: a whole number of milliseconds is expected')
end
if redis.call('exists', KEYS[1]) == 1 then
  local fields = redis.pcall('hmget', KEYS[1], ':hold')
  if fields.err then return fields end
  return {0, redis.call('pttl', KEYS[1])}
end
local last = redis.pcall('get', KEYS[2])
if type(last) == 'table' then return last end
local token = 1
if last then
  if #last > 15 or not (last == '0' or string.match(last, '^[1-9]%d*$')) then
    return redis.error_reply('BADVALUE ' .. KEYS[2] .. ' is not a whole number from 0')
  end
  token = tonumber(last) + 1
end
local owner, id = ARGV[2], ARGV[3]
if not (redis.acl_check_cmd('set', KEYS[2], token)
    and redis.acl_check_cmd('hset', KEYS[1], owner, 1, ':hold', id, ':token', token, ':a:' .. id, 1)
    and redis.acl_check_cmd('pexpire', KEYS[1], lease)) then
  return redis.error_reply('NOPERM this user may not run a command the lock needs')
end
redis.call('set', KEYS[2], token)
redis.call('hset', KEYS[1], owner, 1, ':hold', id, ':token', token, ':a:' .. id, 1)
redis.call('pexpire', KEYS[1], lease)
return {1, 1, token}
"#;

const FLOOR_DELETE: &str = benches::lock_peers::CHECK_AND_DELETE_LUA;

/// How a design's pair is sent.
#[derive(Clone, Copy)]
enum Design {
    /// The crate's scripts (or a variant of them) by `EVALSHA`.
    Scripts,
    /// The crate's scripts as functions of one library (`FCALL`).
    Functions,
    /// The raw floor.
    Floor,
}

struct Variant {
    name: &'static str,
    design: Design,
    acquire: String,
    release: String,
}

fn prelude(body: &str) -> String {
    [CHECKS, HOLDS, body].concat()
}

fn variants() -> Vec<Variant> {
    let script = |name, acquire: String, release: String| Variant {
        name,
        design: Design::Scripts,
        acquire,
        release,
    };
    vec![
        script(
            "the scripts as shipped (`EVALSHA`)",
            prelude(ACQUIRE),
            prelude(RELEASE),
        ),
        Variant {
            name: "the same scripts as Redis functions (`FCALL`)",
            design: Design::Functions,
            acquire: String::new(),
            release: String::new(),
        },
        script(
            "without the ACL checks before the first write",
            [CHECKS, NO_ACL, HOLDS, ACQUIRE].concat(),
            [CHECKS, NO_ACL, HOLDS, RELEASE].concat(),
        ),
        script(
            "a lean acquire script for the common case, today's release",
            LEAN_ACQUIRE.to_owned(),
            prelude(RELEASE),
        ),
        script(
            "two scripts that only return, with the same arguments",
            "return {1, 1, 1}".to_owned(),
            "return {0}".to_owned(),
        ),
        Variant {
            name: "floor: `SET NX PX` + check-and-delete script",
            design: Design::Floor,
            acquire: String::new(),
            release: FLOOR_DELETE.to_owned(),
        },
    ]
}

/// The library of the functions design: the shared functions once, each script a function.
fn library() -> String {
    let function = |name: &str, body: &str| {
        format!("redis.register_function('{name}', function(KEYS, ARGV)\n{body}\nend)\n")
    };
    [
        "#!lua name=lease_costs\n",
        CHECKS,
        HOLDS,
        &function("lease_acquire", ACQUIRE),
        &function("lease_release", RELEASE),
    ]
    .concat()
}

fn sha(con: &mut redis::Connection, text: &str) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(text)
        .query(con)
        .expect("SCRIPT LOAD")
}

/// Runs `pairs` pairs of `variant`; returns the server's µs per pair in the commands.
fn run(con: &mut redis::Connection, variant: &Variant, pairs: usize) -> f64 {
    let (acquire, release) = match variant.design {
        Design::Functions => ("lease_acquire".to_owned(), "lease_release".to_owned()),
        Design::Floor => (String::new(), sha(con, &variant.release)),
        Design::Scripts => (sha(con, &variant.acquire), sha(con, &variant.release)),
    };
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(con)
        .expect("RESETSTAT");
    for batch in 0..pairs / BATCH {
        let mut pipe = redis::pipe();
        for n in 0..BATCH {
            let i = batch * BATCH + n;
            let key = format!("costs{}", i % 50);
            let (fence, log, epoch, channel) = (
                format!("{key}:fence"),
                format!("{key}:log"),
                format!("{key}:epoch"),
                format!("{key}:freed"),
            );
            let id = format!("a{i}");
            match variant.design {
                Design::Floor => {
                    pipe.cmd("SET")
                        .arg(&key)
                        .arg(&id)
                        .arg("NX")
                        .arg("PX")
                        .arg(30_000);
                    pipe.cmd("EVALSHA").arg(&release).arg(1).arg(&key).arg(&id);
                }
                Design::Functions | Design::Scripts => {
                    let call = match variant.design {
                        Design::Functions => "FCALL",
                        _ => "EVALSHA",
                    };
                    pipe.cmd(call)
                        .arg(&acquire)
                        .arg(3)
                        .arg(&key)
                        .arg(&fence)
                        .arg(&epoch)
                        .arg(30_000)
                        .arg("owner")
                        .arg(&id)
                        .arg("")
                        .arg("")
                        .arg("")
                        .arg(0)
                        .arg("")
                        .arg(0)
                        .arg(&channel)
                        .arg("numsub");
                    pipe.cmd(call)
                        .arg(&release)
                        .arg(4)
                        .arg(&key)
                        .arg(&fence)
                        .arg(&log)
                        .arg(&epoch)
                        .arg("owner")
                        .arg(&id)
                        .arg(&id)
                        .arg(&channel)
                        .arg("")
                        .arg("")
                        .arg(1)
                        .arg("publish")
                        .arg("")
                        .arg(0);
                }
            }
        }
        let replies: Vec<Value> = pipe.query(con).expect("the pairs");
        if let Some(error) = replies.iter().find_map(|reply| match reply {
            Value::ServerError(error) => Some(format!("{error:?}")),
            _ => None,
        }) {
            panic!("{}: {error}", variant.name);
        }
    }
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .expect("INFO");
    let top_level = ["evalsha", "fcall", "set"];
    let usec: f64 = stats
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter_map(|line| line.split_once(':'))
        .filter(|(command, _)| top_level.contains(command))
        // A floor's SET is its own; the crate's scripts' SETs are counted in their scripts.
        .filter(|(command, _)| *command != "set" || matches!(variant.design, Design::Floor))
        .filter_map(|(_, fields)| {
            fields
                .split(',')
                .find_map(|field| field.strip_prefix("usec="))
                .and_then(|usec| usec.parse::<f64>().ok())
        })
        .sum();
    usec / pairs as f64
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (pairs, runs) = if Request::from_args(&args).quick {
        (2_000, 1)
    } else {
        (50_000, 3)
    };
    let server = RedisServer::start();
    let mut con = server.connection();
    let () = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(library())
        .query::<String>(&mut con)
        .map(drop)
        .expect("FUNCTION LOAD");
    let variants = variants();
    let mut figures: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    println!("# server time per uncontended pair, by script design");
    println!("load at start: {}", loadavg());
    for _ in 0..runs {
        for (variant, figures) in variants.iter().zip(&mut figures) {
            figures.push(run(&mut con, variant, pairs));
        }
    }
    println!("load at end: {}", loadavg());
    println!();
    println!("| design | server µs per pair (runs) | median | / today's |");
    println!("|---|---|---|---|");
    let today = median(figures[0].clone());
    for (variant, runs) in variants.iter().zip(&figures) {
        let shown: Vec<String> = runs.iter().map(|usec| format!("{usec:.2}")).collect();
        let middle = median(runs.clone());
        println!(
            "| {} | {} | {middle:.2} | {:.2} |",
            variant.name,
            shown.join(" / "),
            middle / today
        );
    }
}
