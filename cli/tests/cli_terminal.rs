//! `lease run` at a terminal, driven through tmux as a person would: the command gets the
//! terminal; Ctrl-Z stops the command and `lease` with it, so nothing renews the lease of a
//! stopped command; `fg` continues both while the lease holds; a stopped command whose lease ran
//! out is killed; a command that reads the terminal from the background does not keep the lease.
//! And what a new user sees: Ctrl-C, a server that is not there, a mistyped option.

mod support;
mod tool;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{client, RedisServer};
use testkit::wait_until;
use tool::{gone, scratch};

/// A tmux server of its own with one interactive shell; killed on drop.
struct Terminal {
    socket: String,
}

impl Terminal {
    fn start(url: &str) -> Terminal {
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_lease"))
            .parent()
            .expect("a directory")
            .display()
            .to_string();
        let socket = format!("lease-test-{}-{}", std::process::id(), rand_suffix());
        let terminal = Terminal { socket };
        let shell = format!(
            "env -i HOME=/tmp TERM=xterm PS1='ready> ' PATH={bin_dir}:/usr/bin:/bin \
             LEASE_REDIS_URL={url} bash --norc --noprofile -i"
        );
        let started = terminal
            .tmux()
            .args([
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                "150",
                "-y",
                "50",
                &shell,
            ])
            .status()
            .unwrap_or_else(|error| {
                panic!("tmux is needed for these tests (scripts/test installs it): {error}")
            });
        assert!(started.success(), "tmux new-session");
        terminal.wait_for("the shell's prompt", |screen| screen.contains("ready>"));
        terminal
    }

    fn tmux(&self) -> Command {
        let mut command = Command::new("tmux");
        command.args(["-L", &self.socket]);
        command
    }

    fn keys(&self, keys: &[&str]) {
        let sent = self
            .tmux()
            .args(["send-keys", "-t", "t"])
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(sent.success());
    }

    fn line(&self, text: &str) {
        self.keys(&["-l", text]);
        self.keys(&["Enter"]);
    }

    fn screen(&self) -> String {
        let output = self
            .tmux()
            .args(["capture-pane", "-p", "-t", "t", "-S", "-200"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
    }
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now())
}

/// Types `lease --lease LEASE run job -- cat` at the shell, followed by `after` (` &` to start it
/// in the background), and returns cat's process id once cat has written it.
fn cat_under_lease(terminal: &Terminal, lease: &str, after: &str) -> String {
    let (_dir, pid_file) = scratch("pid");
    terminal.line(&format!(
        "lease --lease {lease} run job -- sh -c 'echo $$ > {}; exec cat'{after}",
        pid_file.display()
    ));
    pid_in(&pid_file)
}

fn pid_in(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(pid) = fs::read_to_string(path) {
            if pid.ends_with('\n') {
                return pid.trim().to_owned();
            }
        }
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn state_of(pid: &str) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

#[test]
fn ctrl_z_stops_the_command_and_lease_and_a_lease_that_runs_out_kills_the_command() {
    let server = RedisServer::start();
    let terminal = Terminal::start(&server.url());
    let cat = cat_under_lease(&terminal, "1s", "");
    terminal.line("typed-at-cat");
    terminal.wait_for("cat echoing what was typed", |screen| {
        screen.matches("typed-at-cat").count() >= 2
    });
    terminal.keys(&["C-z"]);
    terminal.wait_for("the shell saying the job stopped", |screen| {
        screen.contains("Stopped")
    });
    // Nothing renews the lease of the stopped command: it lapses, and the command is killed.
    wait_until(
        "the stopped command is killed",
        Duration::from_secs(10),
        || gone(&cat),
    );
    let lock = client(&server).lock("job").expect("valid");
    wait_until("the lock is free", Duration::from_secs(5), || {
        !lock.is_locked().expect("reachable")
    });
    terminal.line("");
    terminal.wait_for("the shell reporting lease's exit", |screen| {
        screen.contains("Exit 79")
    });
}

#[test]
fn fg_continues_the_command_with_the_terminal_while_the_lease_holds() {
    let server = RedisServer::start();
    let terminal = Terminal::start(&server.url());
    let cat = cat_under_lease(&terminal, "10s", "");
    terminal.keys(&["C-z"]);
    terminal.wait_for("the shell saying the job stopped", |screen| {
        screen.contains("Stopped")
    });
    wait_until("cat is stopped", Duration::from_secs(5), || {
        state_of(&cat) == Some('T')
    });
    terminal.line("fg");
    wait_until("cat runs again", Duration::from_secs(5), || {
        matches!(state_of(&cat), Some('S' | 'R'))
    });
    terminal.line("after-fg");
    terminal.wait_for("cat echoing after fg", |screen| {
        screen.matches("after-fg").count() >= 2
    });
    terminal.keys(&["C-d"]);
    terminal.line("echo code=$?");
    terminal.wait_for("lease's exit code", |screen| screen.contains("code=0"));
    assert!(!client(&server)
        .lock("job")
        .expect("valid")
        .is_locked()
        .expect("reachable"));
}

#[test]
fn a_command_reading_the_terminal_from_the_background_does_not_keep_the_lease() {
    let server = RedisServer::start();
    let terminal = Terminal::start(&server.url());
    let cat = cat_under_lease(&terminal, "1s", " &");
    // cat is stopped by SIGTTIN; lease stops too, and its lease runs out.
    wait_until("the command is killed", Duration::from_secs(10), || {
        gone(&cat)
    });
    let lock = client(&server).lock("job").expect("valid");
    wait_until("the lock is free", Duration::from_secs(5), || {
        !lock.is_locked().expect("reachable")
    });
    terminal.line("");
    terminal.wait_for("the shell reporting lease's exit", |screen| {
        screen.contains("Exit 79")
    });
    terminal.line("echo the-shell-still-has-its-terminal");
    terminal.wait_for("the shell answering", |screen| {
        screen.matches("the-shell-still-has-its-terminal").count() >= 2
    });
}

/// The lines of `screen` from the one with `typed` (the command line as typed) up to the next
/// prompt: what the command printed.
fn printed_after(screen: &str, typed: &str) -> Vec<String> {
    screen
        .lines()
        .skip_while(|line| !line.contains(typed))
        .skip(1)
        .take_while(|line| !line.starts_with("ready>"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn ctrl_c_stops_the_command_releases_the_lock_and_lease_exits_with_its_status() {
    let server = RedisServer::start();
    let terminal = Terminal::start(&server.url());
    let cat = cat_under_lease(&terminal, "10s", "");
    terminal.line("typed-at-cat");
    terminal.wait_for("cat echoing what was typed", |screen| {
        screen.matches("typed-at-cat").count() >= 2
    });
    terminal.keys(&["C-c"]);
    wait_until("cat is gone", Duration::from_secs(5), || gone(&cat));
    terminal.line("echo code=$?");
    // SIGINT killed cat: lease exits 128+2, as a shell reports a command killed by a signal.
    let screen = terminal.wait_for("lease's exit code", |screen| screen.contains("code=130"));
    assert!(
        !screen.lines().any(|line| line.starts_with("lease:")),
        "lease said something:\n{screen}"
    );
    assert!(!client(&server)
        .lock("job")
        .expect("valid")
        .is_locked()
        .expect("reachable"));
}

#[test]
fn a_missing_server_gets_one_line_naming_it_without_its_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let terminal = Terminal::start(&format!("redis://:hunter2@127.0.0.1:{port}"));
    let typed = "lease run job -- echo ran; echo code=$?";
    terminal.line(typed);
    let screen = terminal.wait_for("lease's exit code", |screen| screen.contains("code=69"));
    assert_eq!(
        printed_after(&screen, typed),
        [
            format!(
                "lease: redis unavailable at redis://:***@127.0.0.1:{port}: Connection refused \
                 (os error 111)"
            ),
            "code=69".to_owned()
        ],
        "{screen}"
    );
    assert!(!screen.contains("hunter2"), "{screen}");
}

#[test]
fn a_mistyped_option_gets_clap_s_suggestion_and_the_usage() {
    let server = RedisServer::start();
    let terminal = Terminal::start(&server.url());
    let typed = "lease run --wiat 5s job -- echo ran; echo code=$?";
    terminal.line(typed);
    let screen = terminal.wait_for("lease's exit code", |screen| screen.contains("code=64"));
    let printed = printed_after(&screen, typed).join("\n");
    for expected in [
        "error: unexpected argument '--wiat' found",
        "tip: a similar argument exists: '--wait'",
        "Usage: lease run --wait <DURATION> <NAME> [-- <CMD>...]",
        "For more information, try '--help'.",
    ] {
        assert!(printed.contains(expected), "no {expected:?}:\n{screen}");
    }
    assert!(
        !printed.lines().any(|line| line == "ran"),
        "the command ran:\n{screen}"
    );
}

#[test]
fn lease_alone_shows_its_help_even_with_a_server_in_the_environment() {
    let server = RedisServer::start();
    let terminal = Terminal::start(&server.url());
    let typed = "lease; echo code=$?";
    terminal.line(typed);
    let screen = terminal.wait_for("lease's exit code", |screen| screen.contains("code=64"));
    let printed = printed_after(&screen, typed).join("\n");
    for expected in [
        "Usage: lease [OPTIONS] <COMMAND>",
        "Commands:",
        "  run ",
        "Exit codes:",
    ] {
        assert!(printed.contains(expected), "no {expected:?}:\n{screen}");
    }
    assert!(
        !printed.lines().any(|line| line.starts_with("error:")),
        "{screen}"
    );
}
