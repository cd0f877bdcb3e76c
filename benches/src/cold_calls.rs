//! One call on a server and a client that were idle: each lock call and each raw command follows
//! 10 ms of sleep, as a lock taken now and then does (a hand-off's calls follow the holder's
//! hold). Timed by the caller, and on the server by `SLOWLOG` (with a threshold of 0 it logs every
//! command's execution time, a script's with the commands it calls).

use crate::lock_peers::{check_and_delete, set_nx_px};
use redis::Value;
use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

/// The pause before each call.
pub const IDLE: Duration = Duration::from_millis(10);

/// One kind of call: the caller's p50, and the server's p50 for its command.
pub struct Figure {
    pub call: &'static str,
    pub caller_us: f64,
    pub server_us: Option<i64>,
}

/// `rounds` rounds of the four calls (a `redis-lease` lock, its unlock, the raw floor's `SET NX
/// PX` and its check-and-delete script), each after [`IDLE`], on the server at `url`, whose slow
/// log this sets to log every command and empties.
pub fn figures(url: &str, rounds: usize) -> Vec<Figure> {
    let client = redis_lease::Client::open(url).expect("valid settings");
    let lock = client.lock("cold").expect("a valid name");
    let mut con = redis::Client::open(url)
        .and_then(|client| client.get_connection())
        .expect("connect");
    for (name, value) in [
        ("slowlog-log-slower-than", 0),
        ("slowlog-max-len", rounds as i64 * 32),
    ] {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(&mut con)
            .expect("CONFIG SET");
    }
    let delete = check_and_delete();
    // Loaded, so that the floor's calls are single EVALSHAs.
    let _: i64 = delete
        .key("cold:raw")
        .arg("x")
        .invoke(&mut con)
        .expect("delete");
    let () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query(&mut con)
        .expect("SLOWLOG RESET");
    let mut caller: [Vec<f64>; 4] = Default::default();
    let timed = |samples: &mut Vec<f64>, call: &mut dyn FnMut()| {
        thread::sleep(IDLE);
        let began = Instant::now();
        call();
        samples.push(began.elapsed().as_secs_f64() * 1e6);
    };
    for _ in 0..rounds {
        let [locks, unlocks, sets, deletes] = &mut caller;
        let mut guard = None;
        timed(locks, &mut || guard = Some(lock.lock().expect("free")));
        timed(unlocks, &mut || {
            if let Some(guard) = guard.take() {
                guard.unlock().expect("held");
            }
        });
        timed(sets, &mut || {
            set_nx_px(&mut con, "cold:raw", "x", 30_000);
        });
        timed(deletes, &mut || {
            let _: i64 = delete
                .key("cold:raw")
                .arg("x")
                .invoke(&mut con)
                .expect("delete");
        });
    }
    let server = server_times(&mut con);
    let [locks, unlocks, sets, deletes] = caller;
    // A lock's acquisition is its only EVALSHA of 13 parts, its release of 17.
    [
        ("redis-lease lock", locks, "EVALSHA/13"),
        ("redis-lease unlock", unlocks, "EVALSHA/17"),
        ("raw SET NX PX", sets, "SET/6"),
        ("raw check-and-delete", deletes, "EVALSHA/5"),
    ]
    .into_iter()
    .map(|(call, mut samples, command)| {
        samples.sort_by(f64::total_cmp);
        Figure {
            call,
            caller_us: crate::figures::quantile(&samples, 0.5),
            server_us: server.get(command).copied(),
        }
    })
    .collect()
}

/// The slow log's p50 execution time per command, by its name and number of parts.
fn server_times(con: &mut redis::Connection) -> BTreeMap<String, i64> {
    let entries: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query(con)
        .expect("SLOWLOG GET");
    let mut by_command: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for entry in entries {
        let Value::Array(parts) = entry else { continue };
        let (Some(Value::Int(micros)), Some(Value::Array(args))) = (parts.get(2), parts.get(3))
        else {
            continue;
        };
        let Some(Value::BulkString(name)) = args.first() else {
            continue;
        };
        let key = format!("{}/{}", String::from_utf8_lossy(name), args.len());
        by_command.entry(key).or_default().push(*micros);
    }
    by_command
        .into_iter()
        .map(|(command, mut micros)| {
            micros.sort_unstable();
            (command, micros[micros.len() / 2])
        })
        .collect()
}
