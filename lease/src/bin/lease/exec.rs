//! `lease __exec`: the first moment of the command's process, before it becomes the command. It
//! dies with `lease` (the parent-death signal, SIGKILL), takes the terminal if `lease` hands it
//! one, and executes the command as a shell would (a script without a `#!` line is run by
//! `/bin/sh`), with no signal blocked or ignored that `lease` itself blocks or ignores.

use crate::exit;
use clap::Args;
use nix::sys::signal::Signal;
use nix::unistd::{getpgrp, getppid, Pid};
use std::io::ErrorKind;
use std::os::unix::process::CommandExt;
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
    let error = Command::new(program).args(rest).exec();
    let code = match error.kind() {
        ErrorKind::NotFound => exit::NOT_FOUND,
        ErrorKind::PermissionDenied => exit::CANNOT_EXECUTE,
        _ => exit::FAILED,
    };
    crate::say::say(format_args!("cannot run {program:?}: {error}"));
    crate::say::flush(std::time::Duration::from_millis(500));
    ExitCode::from(code)
}
