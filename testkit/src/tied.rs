//! Servers that die with the process that started them, however it ends: dropped, panicking,
//! aborting, killed with SIGKILL, or kept in a `static` that is never dropped. Each server starts
//! through util-linux's `setpriv --pdeathsig KILL`, which asks the kernel to kill it when its
//! parent goes, and then becomes the server (the same process id, so pausing and killing it by id
//! work as before). The kernel sends that signal when the *thread* that started the server ends,
//! not the process, so every server starts from one thread that lives as long as the process.
//! Where `setpriv` is missing the server starts plainly, and only its owner's drop stops it.

use std::io;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread;

/// A command to start, and where to send the started child.
type Request = (Command, Sender<io::Result<Child>>);

/// A command that runs `program`, killed when this process ends, when `setpriv` is here.
pub(crate) fn command(program: &Path) -> Command {
    match setpriv() {
        Some(setpriv) => {
            let mut command = Command::new(setpriv);
            command.args(["--pdeathsig", "KILL", "--"]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// A command that runs `program` as `user` when one is given (for servers that refuse to run as
/// root), killed when this process ends. `setpriv` changes the user and then execs the program,
/// which keeps the process id the server's own; without `setpriv`, `runuser` runs it (as a child
/// of its own, which signals by process id then miss).
pub(crate) fn command_as(program: &Path, user: Option<&str>) -> Command {
    match (setpriv(), user) {
        (_, None) => command(program),
        (Some(setpriv), Some(user)) => {
            let mut command = Command::new(setpriv);
            command
                .arg(format!("--reuid={user}"))
                .arg(format!("--regid={user}"))
                .arg("--init-groups")
                .args(["--pdeathsig", "KILL", "--"])
                .arg(program);
            command
        }
        (None, Some(user)) => {
            let mut command = Command::new("runuser");
            command.args(["-u", user, "--"]).arg(program);
            command
        }
    }
}

/// Starts `command` from the thread that lives as long as the process.
pub(crate) fn spawn(command: Command) -> io::Result<Child> {
    static STARTER: OnceLock<Mutex<Sender<Request>>> = OnceLock::new();
    let starter = STARTER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<Request>();
        thread::Builder::new()
            .name("testkit-starter".into())
            .spawn(move || {
                for (mut command, reply) in incoming {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("start the thread that starts servers");
        Mutex::new(requests)
    });
    let (reply, started) = mpsc::channel();
    starter
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send((command, reply))
        .map_err(|_| io::Error::other("the thread that starts servers is gone"))?;
    started
        .recv()
        .map_err(|_| io::Error::other("the thread that starts servers is gone"))?
}

/// util-linux's `setpriv`, if it is installed and knows `--pdeathsig`.
fn setpriv() -> Option<&'static Path> {
    static SETPRIV: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    SETPRIV
        .get_or_init(|| {
            let path = crate::programs::find("setpriv")?;
            let help = Command::new(&path).arg("--help").output().ok()?;
            String::from_utf8_lossy(&help.stdout)
                .contains("--pdeathsig")
                .then_some(path)
        })
        .as_deref()
}
