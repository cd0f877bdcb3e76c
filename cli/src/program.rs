//! This program, as its helper processes (`__keeper`, `__exec`) are started from.

use crate::exit::{self, Failure};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// This program, to start its helpers from: where the system names the file this process runs
/// (Linux's `/proc/self/exe`), that file, even once an upgrade or a rebuild replaced or removed
/// it during a long `--wait`, so that the helpers are always of the same version; elsewhere the
/// path it was started from. The helper's `argv[0]` stays this program's.
pub fn this_program() -> Result<Command, Failure> {
    let running = std::path::Path::new("/proc/self/exe");
    let started_as = std::env::args_os().next().unwrap_or_else(|| "lease".into());
    let mut command = if running.exists() {
        Command::new(running)
    } else {
        let path = std::env::current_exe().map_err(|error| {
            Failure::new(exit::FAILED, format!("cannot find this program: {error}"))
        })?;
        Command::new(path)
    };
    command.arg0(started_as);
    Ok(command)
}
