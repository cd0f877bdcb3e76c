//! A scenario fails when one of its clients ends before its time: what the checker reads is then
//! the work of fewer clients than ran. The real client runs each scenario; in one of them, one
//! client process of two is killed a second into its run.

use faults::fault::Fault;
use faults::mode::Mode;
use faults::primitive::Primitive;
use faults::scenario::{self, Outcome, Scenario, Settings};
use faults::verdict::Verdict;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The real client.
const CLIENT: &str = env!("CARGO_BIN_EXE_fault_client");

fn baseline() -> Scenario {
    Scenario {
        name: "contention baseline",
        inside: true,
        mode: Mode::Single,
        fault: Fault::None,
        short: true,
        primitive: Primitive::Lock,
    }
}

/// Runs the baseline with two client processes of one thread each, for 3 s, through
/// `client_binary`, its histories under `dir`.
fn run(client_binary: PathBuf, dir: &Path) -> Outcome {
    let settings = Settings {
        clients: 2,
        threads: 1,
        lease: Duration::from_secs(1),
        duration: Duration::from_secs(3),
        every: Duration::from_secs(3),
        seed: 1,
        client_binary,
        dir: dir.to_owned(),
    };
    scenario::run(&baseline(), &settings).expect("the scenario runs")
}

/// A directory of this test's own, empty.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("faults-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

#[test]
fn a_scenario_whose_client_is_killed_before_its_time_fails() {
    let dir = scratch("early-end");
    let whole = run(PathBuf::from(CLIENT), &dir.join("whole"));
    assert_eq!(whole.ended_early, [], "{:?}", whole.findings);
    assert_eq!(whole.verdict(), Verdict::Pass, "{:?}", whole.findings);
    assert!(whole.findings.cycles > 0, "the clients took the lock");

    // The client named c1 is killed (SIGKILL) 1 s into its 3 s; c0 runs its time.
    let wrapper = dir.join("c1-killed-early");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  c1) exec timeout -s KILL 1 '{CLIENT}' \"$@\" ;;\n  \
             *) exec '{CLIENT}' \"$@\" ;;\nesac\n"
        ),
    )
    .expect("the wrapper script");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
        .expect("the wrapper made executable");
    let cut = run(wrapper, &dir.join("cut"));
    assert!(cut.findings.cycles > 0, "c0 took the lock");
    let named: Vec<&str> = cut.ended_early.iter().map(|end| end.who.as_str()).collect();
    assert_eq!(named, ["c1", "c1.0"], "{:?}", cut.ended_early);
    assert_eq!(cut.verdict(), Verdict::Fail, "{:?}", cut.findings);
    let _ = std::fs::remove_dir_all(&dir);
}
