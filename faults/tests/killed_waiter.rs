//! A client process killed while it waits is started again in its place, writing on in the same
//! histories: the scenario counts no client ended before its time, and the checker reads the
//! work of both processes. The real client runs against a real PostgreSQL server.

use faults::fault::Fault;
use faults::history::{self, Event};
use faults::mode::Mode;
use faults::primitive::Primitive;
use faults::scenario::{self, Scenario, Settings};
use faults::verdict::Verdict;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// The real client.
const CLIENT: &str = env!("CARGO_BIN_EXE_fault_client");

#[test]
fn a_client_killed_while_it_waits_is_started_again_and_ends_on_time() {
    let dir = std::env::temp_dir().join(format!("faults-killed-waiter-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let settings = Settings {
        clients: 3,
        threads: 2,
        lease: Duration::from_secs(1),
        duration: Duration::from_secs(4),
        every: Duration::from_secs(1),
        seed: 1,
        client_binary: PathBuf::from(CLIENT),
        dir: dir.clone(),
    };
    let killed = Scenario {
        name: "killed waiter",
        inside: true,
        mode: Mode::Postgres { pooled: false },
        fault: Fault::KillWaiter,
        short: true,
        primitive: Primitive::Lock,
    };
    let outcome = scenario::run(&killed, &settings).expect("the scenario runs");
    assert_eq!(outcome.ended_early, [], "{:?}", outcome.findings);
    let kills = outcome.kinds.get("KillWaiter").copied().unwrap_or(0);
    assert!(kills > 0, "no client was killed: {:?}", outcome.kinds);
    assert_eq!(outcome.effective, kills);
    assert_eq!(outcome.verdict(), Verdict::Pass, "{:?}", outcome.findings);

    // Each kill left a process id more in the histories: the killed ones' and those started in
    // their place.
    let histories: Vec<PathBuf> = std::fs::read_dir(dir.join("killed_waiter"))
        .expect("the histories")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    let pids: BTreeSet<u32> = history::merge(&histories)
        .into_iter()
        .filter_map(|event| match event {
            Event::Start { pid, .. } => Some(pid),
            _ => None,
        })
        .collect();
    assert_eq!(pids.len(), settings.clients + kills, "{pids:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
