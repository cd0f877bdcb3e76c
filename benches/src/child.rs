//! A child process of this same binary, run again with a mode word and arguments, and spoken to
//! in lines: it says "ready" once it is set up, then reads its orders on stdin and answers on
//! stdout.

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};

/// The parent's side of a child process.
pub struct ChildProcess {
    child: std::process::Child,
    to_child: Option<ChildStdin>,
    from_child: Lines<BufReader<ChildStdout>>,
}

impl ChildProcess {
    /// Starts this binary with `mode` and `args`, and waits for its "ready".
    pub fn start(mode: &str, args: &[&str]) -> ChildProcess {
        let mut child = Command::new(std::env::current_exe().expect("this binary"))
            .arg(mode)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the child process");
        let to_child = child.stdin.take();
        let from_child = BufReader::new(child.stdout.take().expect("piped")).lines();
        let mut started = ChildProcess {
            child,
            to_child,
            from_child,
        };
        assert_eq!(started.line(), "ready", "the child started");
        started
    }

    /// Sends the child one line.
    pub fn say(&mut self, line: &str) {
        let to_child = self.to_child.as_mut().expect("stdin open until the end");
        writeln!(to_child, "{line}").expect("child alive");
        to_child.flush().expect("child alive");
    }

    /// The child's next line.
    pub fn line(&mut self) -> String {
        self.from_child
            .next()
            .expect("a line from the child")
            .expect("readable")
    }

    /// Kills the child at once (SIGKILL), as a crash would, and reaps it.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Closes the child's stdin and waits for it to exit.
    pub fn finish(mut self) {
        drop(self.to_child.take());
        let _ = self.child.wait();
    }
}

/// The child's side: says "ready" to the parent.
pub fn ready() {
    let mut out = std::io::stdout();
    writeln!(out, "ready").expect("parent alive");
    out.flush().expect("parent alive");
}
