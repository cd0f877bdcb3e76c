//! Helpers for the tests of the `lease` command-line tool: it runs in a process group of its own,
//! as it would under a shell, so that it never takes the test's terminal.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn lease(url: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lease"));
    command.env("LEASE_REDIS_URL", url).process_group(0);
    command
}

pub fn output(command: &mut Command) -> Output {
    command.output().expect("run the lease binary")
}

pub fn spawn(command: &mut Command) -> Child {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the lease binary")
}

/// Waits for a child with a deadline, killing it if it overruns.
pub fn finish(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("poll the child").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("lease did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("collect the output")
}

pub fn scratch(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(name);
    (dir, path)
}

pub fn shell(script: &str, path: &Path) -> Vec<String> {
    vec![
        "--".into(),
        "sh".into(),
        "-c".into(),
        script.replace("FILE", &path.display().to_string()),
    ]
}

/// Nanoseconds of the wall clock, as `date +%s%N` prints them.
pub fn stamps(path: &Path) -> Vec<u128> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// Whether process `pid` is gone (or a zombie nobody has reaped yet).
pub fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}
