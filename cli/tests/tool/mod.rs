//! Helpers for the tests of the `lease` command-line tool: it runs in a process group of its own,
//! as it would under a shell, so that it never takes the test's terminal.
#![allow(dead_code)]

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn lease(url: &str) -> Command {
    let mut command = bare();
    command.env("LEASE_REDIS_URL", url);
    command
}

/// The tool with none of the variables it reads for its settings: it goes by its flags and its
/// defaults, and by what the test sets.
pub fn bare() -> Command {
    bare_from(Path::new(env!("CARGO_BIN_EXE_lease")))
}

/// [`bare`], of the tool at `program`.
pub fn bare_from(program: &Path) -> Command {
    let mut command = Command::new(program);
    command.process_group(0);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("LEASE_") || name == "REDIS_URL" {
            command.env_remove(name);
        }
    }
    command
}

/// A local port nobody listens on (bound, then let go).
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// What the tool wrote on stderr.
pub fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// What the tool wrote on stdout.
pub fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
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

/// The requests and macros a man page may use here.
const ROFF: [&str; 18] = [
    ".TH", ".SH", ".SS", ".TP", ".PP", ".IP", ".LP", ".B", ".I", ".RS", ".RE", ".br", ".sp", ".nf",
    ".fi", ".ie", ".el", ".ds",
];

/// The man page `args` print, checked to be roff: `.TH` first after the apostrophe preamble,
/// no unknown request, and no warning from groff where it is installed.
pub fn man_page(args: &[&str]) -> String {
    let done = output(bare().args(args));
    assert_eq!(done.status.code(), Some(0), "{args:?}: {done:?}");
    let page = stdout_of(&done);
    let first = page
        .lines()
        .find(|line| !line.starts_with(".ie") && !line.starts_with(".el"))
        .unwrap_or_default();
    assert!(first.starts_with(".TH "), "{args:?} starts with {first:?}");
    for line in page.lines().filter(|line| line.starts_with('.')) {
        let request = line.split_whitespace().next().unwrap_or_default();
        assert!(
            ROFF.contains(&request),
            "{args:?}: unknown request {line:?}"
        );
    }
    let groff = Command::new("groff")
        .args(["-man", "-Tascii", "-ww", "-z"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    if let Ok(mut groff) = groff {
        groff
            .stdin
            .take()
            .expect("stdin")
            .write_all(page.as_bytes())
            .expect("feed groff");
        let checked = groff.wait_with_output().expect("groff ran");
        assert!(checked.status.success(), "{args:?}: {checked:?}");
        assert_eq!(stderr_of(&checked), "", "{args:?}: groff warns");
    }
    page
}

/// Checks the log at `stamps` of `runs` jobs that each wrote `start TOKEN` and `end TOKEN` (their
/// `LEASE_FENCING_TOKEN`): each ended before the next started, with a higher token.
pub fn one_run_at_a_time(stamps: &Path, runs: usize) {
    let log = std::fs::read_to_string(stamps).expect("the jobs wrote stamps");
    let lines: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 2 * runs, "{log}");
    let mut last_token = 0;
    for pair in lines.chunks(2) {
        assert_eq!(
            (pair[0][0], pair[1][0]),
            ("start", "end"),
            "interleaved:\n{log}"
        );
        assert_eq!(pair[0][1], pair[1][1], "one run per pair:\n{log}");
        let token: u64 = pair[0][1].parse().expect("a token");
        assert!(token > last_token, "tokens rise:\n{log}");
        last_token = token;
    }
}
