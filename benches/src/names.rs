//! Many threads on many names: threads sharing one `redis-lease` client take and release random names
//! among 10,000, as fast as they can; and the floor, `redis-benchmark` running the same two
//! commands as the raw lock (`SET NX PX` on a random key, then the check-and-delete script by
//! `EVALSHA`) with as many connections, without pipelining.

use crate::lock_peers::{check_and_delete, LockPeer, CHECK_AND_DELETE_LUA};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// How many names the threads choose from.
pub const NAMES: u64 = 10_000;

/// Lock + unlock pairs per second for `threads` threads of one client on random names.
pub fn lease_pairs<P: LockPeer>(urls: &[String], threads: usize, run: Duration) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let pairs = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = P::group(urls, threads)
        .into_iter()
        .enumerate()
        .map(|(n, mut peer)| {
            let (stop, pairs, start) = (stop.clone(), pairs.clone(), start.clone());
            thread::spawn(move || {
                let mut rng = testkit::Lcg(n as u64 + 1);
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let name = format!("name:{}", rng.below(NAMES));
                    peer.with_lock(&name, &mut || {});
                    pairs.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    start.wait();
    let began = Instant::now();
    thread::sleep(run);
    let done = pairs.load(Ordering::Relaxed);
    let elapsed = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("no panic");
    }
    done as f64 / elapsed.as_secs_f64()
}

/// Requests per second `redis-benchmark` reports for `command` (quiet mode).
fn benchmark(port: u16, cluster: bool, clients: usize, requests: u64, command: &[&str]) -> f64 {
    let mut run = Command::new("redis-benchmark");
    run.args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-c", &clients.to_string(), "-n", &requests.to_string()])
        .args(["-r", &NAMES.to_string(), "-q"]);
    if cluster {
        run.arg("--cluster");
    }
    let output = run.args(command).output().expect("run redis-benchmark");
    let text = String::from_utf8_lossy(&output.stdout);
    // The last report line: "<command>: 123456.79 requests per second, ...".
    text.rsplit('\r')
        .chain(text.lines())
        .find_map(|line| {
            let (_, rest) = line.rsplit_once(": ")?;
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
        .unwrap_or_else(|| panic!("redis-benchmark printed nothing readable: {text}"))
}

/// The floor's pairs per second: `SET NX PX` then `EVALSHA` of the check-and-delete script, each
/// measured on its own with `clients` connections; a pair takes the time of one of each. The
/// script is loaded first on every port given (every master of a cluster).
pub fn floor_pairs(ports: &[u16], cluster: bool, clients: usize, requests: u64) -> f64 {
    for port in ports {
        let loaded = Command::new("redis-cli")
            .args(["-p", &port.to_string(), "SCRIPT", "LOAD"])
            .arg(CHECK_AND_DELETE_LUA)
            .output()
            .expect("run redis-cli");
        assert!(loaded.status.success(), "SCRIPT LOAD on {port}");
    }
    let sha = check_and_delete().get_hash().to_owned();
    // In cluster mode redis-benchmark sends each request to a node and puts a tag of that node's
    // slots where a key says `{tag}`; elsewhere `{tag}` is just part of the key.
    let key = "lock:{tag}:__rand_int__";
    let set = benchmark(
        ports[0],
        cluster,
        clients,
        requests,
        &["SET", key, "v", "NX", "PX", "30000"],
    );
    let delete = benchmark(
        ports[0],
        cluster,
        clients,
        requests,
        &["EVALSHA", &sha, "1", key, "v"],
    );
    1.0 / (1.0 / set + 1.0 / delete)
}
