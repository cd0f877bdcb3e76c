//! What an uncontended lock + unlock pair costs the server, by design, beside Redisson's `RLock`
//! and `RFencedLock` (their scripts, verbatim) and the raw floor, in one run on one private
//! `redis-server`; what one thread of the library makes of it; and the memory the scripts take.
//!
//! Sections (all without arguments):
//! - `designs`: each design's pairs on 50 names, one call per round trip (the server idle
//!   between calls, as in production) and pipelined (never idle), three runs in turn; the
//!   server's µs per pair in the commands (`INFO commandstats`, every command but the
//!   measurement's own; a script's time includes the commands it calls; wall time) and its CPU
//!   per pair (`INFO cpu`, I/O included; not inflated when other processes take its core).
//! - `library`: one thread of a `redis-lease` client, `lock()` + `unlock()` on one name, in turn
//!   with the raw floor on its own connection, three runs: pairs/s, the server's µs per pair, and
//!   this process's CPU per pair.
//! - `memory`: each peer's first pair on a new empty server: what the server's memory grew by,
//!   and its Lua parts (`INFO memory`).
//! - `steps`: what each step of a script costs inside the server, warm: one script times 20,000
//!   runs of each step by the server's clock (`TIME`), the least of five, less an empty loop's.
//!
//! Run: `cargo run --release -p benches --bin script_costs [quick] [designs|library|memory|steps]`.
#![allow(clippy::print_stdout)]

use benches::figures::{loadavg, median, Request};
use benches::lock_peers::{LockPeer, Raw};
use benches::script_pairs::{self, Design, Spent};
use std::time::Instant;
use testkit::RedisServer;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let request = Request::from_args(&args);
    let (round_trips, pipelined, library_pairs, runs) = if request.quick {
        (300, 2_000, 300, 1)
    } else {
        (10_000, 50_000, 20_000, 3)
    };
    println!("# what a pair costs the server");
    println!("load at start: {}", loadavg());
    if request.wants("designs") {
        designs(round_trips, pipelined, runs);
    }
    if request.wants("library") {
        library(library_pairs, runs);
    }
    if request.wants("memory") {
        memory();
    }
    if request.wants("steps") {
        steps(runs);
    }
    println!();
    println!("load at end: {}", loadavg());
}

/// Prints one table of per-design figures (each design's runs), with the ratios to Redisson's
/// `RFencedLock` and to the floor, in the commands' time and in the server's CPU.
fn table(title: &str, figures: &[(Design, Vec<Spent>)]) {
    let middle = |runs: &[Spent], of: fn(&Spent) -> f64| median(runs.iter().map(of).collect());
    let of_design = |design: Design, of: fn(&Spent) -> f64| {
        figures
            .iter()
            .find(|(each, _)| *each == design)
            .map_or(f64::NAN, |(_, runs)| middle(runs, of))
    };
    let commands: fn(&Spent) -> f64 = |spent| spent.commands;
    let cpu: fn(&Spent) -> f64 = |spent| spent.cpu;
    let (fenced, floor) = (
        of_design(Design::RedissonFenced, commands),
        of_design(Design::Floor, commands),
    );
    let fenced_cpu = of_design(Design::RedissonFenced, cpu);
    println!();
    println!("## {title}");
    println!("| design | µs per pair in the commands (runs) | median | / `RFencedLock` | / floor | server CPU µs per pair (runs) | median | / `RFencedLock` |");
    println!("|---|---|---|---|---|---|---|---|");
    for (design, runs) in figures {
        let shown = |of: fn(&Spent) -> f64| {
            let runs: Vec<String> = runs
                .iter()
                .map(|spent| format!("{:.2}", of(spent)))
                .collect();
            runs.join(" / ")
        };
        let (usec, used) = (middle(runs, commands), middle(runs, cpu));
        println!(
            "| {} | {} | {usec:.2} | {:.2} | {:.2} | {} | {used:.2} | {:.2} |",
            design.name(),
            shown(commands),
            usec / fenced,
            usec / floor,
            shown(cpu),
            used / fenced_cpu,
        );
    }
}

fn designs(round_trips: u64, pipelined: u64, runs: usize) {
    let server = RedisServer::start();
    let mut con = server.connection();
    let loaded: Vec<_> = Design::ALL
        .iter()
        .map(|design| script_pairs::prepare(&mut con, *design))
        .collect();
    for (title, pairs, pipe) in [
        (
            format!("one call per round trip, {round_trips} pairs a run"),
            round_trips,
            false,
        ),
        (
            format!("pipelined, {pipelined} pairs a run in batches of 500"),
            pipelined,
            true,
        ),
    ] {
        let mut figures: Vec<(Design, Vec<Spent>)> =
            Design::ALL.iter().map(|design| (*design, vec![])).collect();
        for _ in 0..runs {
            for (each, (_, runs)) in loaded.iter().zip(&mut figures) {
                runs.push(script_pairs::run(&mut con, each, pairs, pipe));
            }
        }
        table(&title, &figures);
    }
}

/// One thread: `redis-lease`'s `lock()` + `unlock()` in turn with the raw floor, each on the
/// same server; pairs/s and the server's µs per pair.
fn library(pairs: u64, runs: usize) {
    let server = RedisServer::start();
    let urls = [server.url()];
    let mut stats = server.connection();
    let client = redis_lease::Client::builder(server.url())
        .default_lease(benches::lock_peers::LEASE)
        .build()
        .expect("valid settings");
    let lock = client.lock("uncontended").expect("a valid name");
    let mut floor = Raw::group(&urls, 1).pop().expect("one handle");
    let mut timed = |pair: &mut dyn FnMut()| {
        for _ in 0..pairs / 10 {
            pair();
        }
        script_pairs::reset(&mut stats);
        let cpu = script_pairs::server_cpu(&mut stats);
        let own = benches::cpu::process_seconds() * 1e6;
        let began = Instant::now();
        for _ in 0..pairs {
            pair();
        }
        let rate = pairs as f64 / began.elapsed().as_secs_f64();
        let own = ((benches::cpu::process_seconds() * 1e6) - own) / pairs as f64;
        let cpu = script_pairs::server_cpu(&mut stats) - cpu;
        let spent = Spent {
            commands: script_pairs::server_usec(&mut stats) / pairs as f64,
            cpu: cpu / pairs as f64,
        };
        (rate, spent, own)
    };
    let mut figures = vec![];
    for _ in 0..runs {
        let lease = timed(&mut || {
            let guard = lock.lock().expect("acquired");
            guard.unlock().expect("released");
        });
        let raw = timed(&mut || floor.with_lock("uncontended-floor", &mut || {}));
        figures.push((lease, raw));
    }
    println!();
    println!("## one thread, {pairs} pairs a run, in turn with the floor");
    println!("| run | lease pairs/s | floor pairs/s | lease / floor | µs per pair in the commands, lease | floor | server CPU µs per pair, lease | floor | client CPU µs per pair, lease | floor |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (run, ((lease, lease_spent, lease_own), (raw, raw_spent, raw_own))) in
        figures.iter().enumerate()
    {
        println!(
            "| {} | {lease:.0} | {raw:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {lease_own:.2} | {raw_own:.2} |",
            run + 1,
            lease / raw,
            lease_spent.commands,
            raw_spent.commands,
            lease_spent.cpu,
            raw_spent.cpu,
        );
    }
    let ratios: Vec<f64> = figures.iter().map(|((l, ..), (r, ..))| l / r).collect();
    println!("median lease / floor: {:.2}", median(ratios));
}

/// What `INFO memory` says of `field`, in bytes.
fn memory_field(con: &mut redis::Connection, field: &str) -> f64 {
    let info: String = redis::cmd("INFO").arg("memory").query(con).expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

/// Each peer's first pair on a new empty server: what the memory grew by.
fn memory() {
    println!();
    println!("## memory: one pair on a new empty server (KB)");
    println!("| peer | used_memory before | after | grew | Lua VM (`used_memory_vm_eval`) | script cache (`used_memory_scripts_eval`) |");
    println!("|---|---|---|---|---|---|");
    let kb = |bytes: f64| bytes / 1024.0;
    let row = |name: &str, pair: &dyn Fn(&RedisServer)| {
        let server = RedisServer::start();
        let mut con = server.connection();
        let before = memory_field(&mut con, "used_memory");
        let (vm, cache) = (
            memory_field(&mut con, "used_memory_vm_eval"),
            memory_field(&mut con, "used_memory_scripts_eval"),
        );
        pair(&server);
        let after = memory_field(&mut con, "used_memory");
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} (+{:.1}) | {:.1} |",
            kb(before),
            kb(after),
            kb(after - before),
            kb(memory_field(&mut con, "used_memory_vm_eval")),
            kb(memory_field(&mut con, "used_memory_vm_eval") - vm),
            kb(memory_field(&mut con, "used_memory_scripts_eval") - cache),
        );
    };
    for design in [
        Design::Floor,
        Design::RedissonLock,
        Design::RedissonFenced,
        Design::Lease,
        Design::General,
    ] {
        row(design.name(), &|server| {
            let mut con = server.connection();
            let loaded = script_pairs::prepare(&mut con, design);
            for command in loaded.pair(0) {
                let _: redis::Value = command.query(&mut con).expect("a call");
            }
        });
    }
    row("redis-lease client: `lock()` + `unlock()`", &|server| {
        let client = redis_lease::Client::open(&server.url()).expect("valid");
        let guard = client.lock("first").expect("valid").lock().expect("free");
        guard.unlock().expect("released");
    });
}

/// The script that times the steps: each step `n` times in a loop, by the server's clock, less
/// the empty loop's time; replies `name µs` per step.
const STEPS: &str = r#"
local function now() local t = redis.call('time') return tonumber(t[1]) * 1e6 + tonumber(t[2]) end
local n = tonumber(ARGV[1])
local out, empty = {}, 0
-- The least of five timings: another process that takes the server's core only adds.
local function time(name, step)
  local least = math.huge
  for _ = 1, 5 do
    local began = now()
    for i = 1, n do step(i) end
    least = math.min(least, (now() - began) / n)
  end
  if name == '' then
    empty = least
  else
    out[#out + 1] = name .. ' ' .. string.format('%.3f', least - empty)
  end
end
local id, owner = 'a0000000000000001', '5c0ffee15c0ffee15c0ffee15c0ffee1:1'
time('', function() end)
time('redis.acl_check_cmd, one key', function() redis.acl_check_cmd('set', 'k') end)
time('redis.acl_check_cmd, HSET with its 8 arguments', function()
  redis.acl_check_cmd('hset', 'k', owner, 1, ':hold', id, ':token', '5', ':a:' .. id, 1) end)
time('GET of a counter', function() redis.pcall('get', 'c') end)
time('EXISTS', function() redis.call('exists', 'l') end)
time('SET of a counter', function() redis.call('set', 'c', '12345') end)
time('INCR of a counter', function() redis.call('incr', 'c') end)
time('HSET of 1 field + DEL', function() redis.call('hset', 'l', owner, 1) redis.call('del', 'l') end)
time('HSET of 4 fields + DEL', function()
  redis.call('hset', 'l', owner, 1, ':hold', id, ':token', '12345', ':a:' .. id, 1)
  redis.call('del', 'l') end)
time('HINCRBY of 1 field + DEL', function() redis.call('hincrby', 'l', owner, 1) redis.call('del', 'l') end)
time('PEXPIRE', function() redis.call('pexpire', 'c', 30000) end)
time('HMGET of 3 fields', function() redis.pcall('hmget', 'l', ':hold', owner, ':a:' .. id) end)
time('SET PX (a release log, a latch)', function() redis.call('set', 'r', id, 'px', 60000) end)
time('PUBLISH, nobody subscribed', function() redis.call('publish', 'ch', 'freed') end)
time('string.find of a lease', function() string.find('30000', '^[1-9]%d*$') end)
time('string.format of a token', function() string.format('%.0f', tonumber('12345') + 1) end)
time('a closure made', function() local f = function() return 1 end end)
time('a reply table of 3', function() local t = {1, 1, '12345'} end)
return out
"#;

/// What each step of a script costs inside the server, warm (see [`STEPS`]).
fn steps(runs: usize) {
    let server = RedisServer::start();
    let mut con = server.connection();
    let mut figures: Vec<(String, Vec<f64>)> = vec![];
    for _ in 0..runs {
        let lines: Vec<String> = redis::cmd("EVAL")
            .arg(STEPS)
            .arg(0)
            .arg(20_000)
            .query(&mut con)
            .expect("the steps");
        for line in lines {
            let (usec, name) = line
                .rsplit_once(' ')
                .map(|(name, usec)| (usec.parse::<f64>().unwrap_or(f64::NAN), name.to_owned()))
                .expect("name and µs");
            match figures.iter_mut().find(|(each, _)| *each == name) {
                Some((_, runs)) => runs.push(usec),
                None => figures.push((name, vec![usec])),
            }
        }
    }
    println!();
    println!("## steps inside a script, warm (µs each; the least of five loops of 20,000, less an empty loop)");
    println!("| step | µs (runs) | median |");
    println!("|---|---|---|");
    for (name, runs) in figures {
        let shown: Vec<String> = runs.iter().map(|usec| format!("{usec:.3}")).collect();
        println!("| {name} | {} | {:.3} |", shown.join(" / "), median(runs));
    }
}
