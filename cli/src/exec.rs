//! `lease __exec`: the first moment of the command's process, before it becomes the command. It
//! dies with `lease` (the parent-death signal, SIGKILL), takes the terminal if `lease` hands it
//! one, and executes the command as a shell would (a script without a `#!` line is run by
//! `/bin/sh`), with no signal blocked or ignored that `lease` itself blocks or ignores.

use crate::exit;
use clap::Args;
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::{getpgrp, getppid, Pid};
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

#[derive(Args)]
pub struct ExecArgs {
    /// The process that started this one: if it is gone already, the command must not run.
    #[arg(long)]
    parent: i32,
    /// Take the controlling terminal's foreground for the command.
    #[arg(long)]
    foreground: bool,
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub fn exec(args: ExecArgs) -> ExitCode {
    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err()
        || getppid() != Pid::from_raw(args.parent)
    {
        // `lease` is gone (or cannot be followed): nothing holds the lease for this command.
        return ExitCode::from(exit::FAILED);
    }
    if args.foreground {
        crate::job::block_sigttou();
        if let Ok(terminal) = std::fs::File::options()
            .read(true)
            .write(true)
            .open("/dev/tty")
        {
            let _ = nix::unistd::tcsetpgrp(&terminal, getpgrp());
        }
    }
    let Some((program, rest)) = args.command.split_first() else {
        return ExitCode::from(exit::USAGE);
    };
    // Returns only if the command could not be executed.
    let mut error = Command::new(program).args(rest).exec();
    if error.raw_os_error() == Some(Errno::ENOEXEC as i32) {
        // A file the kernel cannot run (a script without a `#!` line): run it by `/bin/sh`, as
        // execvp(3) and shells do. Where the C library's execvp does this itself it never gets
        // here; where it does not (musl), this is the same rule.
        if let Some(path) = found(program) {
            error = Command::new("/bin/sh").arg(path).args(rest).exec();
        }
    }
    let code = match error.kind() {
        ErrorKind::NotFound => exit::NOT_FOUND,
        ErrorKind::PermissionDenied => exit::CANNOT_EXECUTE,
        _ => exit::FAILED,
    };
    log::error!("cannot run {program:?}: {error}");
    crate::say::flush(std::time::Duration::from_millis(500));
    ExitCode::from(code)
}

/// The file `program` names, as execvp(3) finds it: the program itself if it has a `/`, else the
/// first executable file of that name in a directory of `$PATH`.
fn found(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|file| {
            file.metadata()
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}
