//! A server's processes: who they run as (the `postgres` user when this process is root, which
//! PostgreSQL and PgBouncer refuse to run as), and signals to the postmaster and the processes it
//! started, which a frozen server must all be (a backend keeps answering while only the
//! postmaster is stopped).

use std::fs;
use std::process::Command;

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// Sends `signal` (such as `-STOP`) to `pid`.
pub(super) fn signal(signal: &str, pid: u32) {
    let _ = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
}

/// The processes whose parent is `pid`.
pub(super) fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let child: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            // The fields after the command's closing parenthesis: state, then the parent's id.
            let after = &stat[stat.rfind(')')? + 1..];
            let parent: u32 = after.split_whitespace().nth(1)?.parse().ok()?;
            (parent == pid).then_some(child)
        })
        .collect()
}
