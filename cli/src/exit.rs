//! The tool's exit codes, and how a failure maps to one.

use std::process::ExitCode;

/// `lease run` could not acquire NAME within `--wait`: it is held elsewhere.
pub const NOT_ACQUIRED: u8 = 75;
/// The lease was lost while the command ran; the command was stopped.
pub const LOST: u8 = 79;
/// The store (Redis, ZooKeeper, PostgreSQL) could not be reached, did not answer in time, or
/// said it cannot serve now.
pub const UNAVAILABLE: u8 = 69;
/// The store refused: a wrong password or ACL rule, a right PostgreSQL's role lacks, a database
/// it does not have, a cluster node given as a server, a full server, a TLS handshake refused, a
/// port that does not speak TLS. Retrying will not help until a setting changes.
pub const REFUSED: u8 = 78;
/// NAME is another primitive's than the flags say, or a key of it holds something no primitive
/// can use (another type, a counter that cannot give a token).
pub const DATA: u8 = 65;
/// The command line is wrong: an unknown option, a bad duration or URL, a missing command (or
/// none at all).
pub const USAGE: u8 = 64;
/// The command could not be started because it is not executable.
pub const CANNOT_EXECUTE: u8 = 126;
/// The command could not be started because it was not found.
pub const NOT_FOUND: u8 = 127;
/// Anything else the tool could not do (an unexpected reply, a thread that would not start).
pub const FAILED: u8 = 1;
/// `lease status`: the lock is free (0 when it is held).
pub const FREE: u8 = 1;
/// `lease latch --wait`: the latch is not set (never set, or lapsed), or lapsed while waited
/// for: nothing will open it.
pub const NO_LATCH: u8 = 66;
/// `lease latch --count`: the latch still counts down a round, whose count is not changed.
pub const STILL_COUNTING: u8 = 73;

/// The exit code of a wait stopped by `signal`: 128 + its number, as a shell gives for a
/// command a signal killed.
pub fn interrupted(signal: i32) -> u8 {
    u8::try_from(signal).map_or(FAILED, |signal| 128u8.saturating_add(signal))
}

/// The commands that talk to the store, whose failures have codes of their own.
const STORE: &[&str] = &["run", "status", "unlock", "leader", "resize", "latch"];

/// The exit codes, what each means, and the commands that give it, as `--help` and the man
/// pages show them.
const CODES: [(&str, &str, &[&str]); 18] = [
    (
        "the command's own",
        "lease run: the command's exit status; 128+N if signal N killed it",
        &["run"],
    ),
    (
        "0, 1",
        "lease status: NAME is held (0) or free (1)",
        &["status"],
    ),
    (
        "0, 1",
        "lease status of a latch: it counts down (0) or is at zero (1); of a rate limiter: no \
         grant is available (0) or one is (1)",
        &["status"],
    ),
    (
        "0, 1",
        "lease leader: someone leads (0) or no one does (1)",
        &["leader"],
    ),
    (
        "0",
        "lease latch: done; with --wait, the latch is at zero",
        &["latch"],
    ),
    (
        "64",
        "usage error: no command, a bad option, duration, URL or name",
        &[],
    ),
    (
        "65",
        "NAME is another primitive's than the flags say (a semaphore's, a read-write lock's, an \
         election's: the message names the flag that takes it), or a key of it holds something \
         no primitive can use",
        &["run", "unlock"],
    ),
    (
        "65",
        "lease status: NAME is neither held nor usable (a key of it holds something no \
         primitive can use, its fencing tokens are exhausted), or is another primitive's than \
         the flags say",
        &["status"],
    ),
    (
        "66",
        "lease latch --wait: the latch is not set (never set, or lapsed), or lapsed before it \
         reached zero",
        &["latch"],
    ),
    (
        "69",
        "the store unavailable: unreachable, no answer within the timeouts, busy, or too few \
         RedLock masters for a quorum",
        STORE,
    ),
    (
        "75",
        "lease run: NAME is held elsewhere and was not acquired within --wait (-n: at once), or \
         with --rate no run's slot was free (within --wait); -E sets another code",
        &["run"],
    ),
    (
        "73",
        "lease latch --count: the latch still counts down; its count was not changed",
        &["latch"],
    ),
    (
        "75",
        "lease latch --wait DURATION: the latch did not reach zero within DURATION",
        &["latch"],
    ),
    (
        "78",
        "the store refused: password, ACL, a PostgreSQL role's rights, database index, full \
         server, cluster node, TLS handshake, a port that does not speak TLS",
        STORE,
    ),
    (
        "79",
        "lease run: the lease was lost while the command ran (it was stopped)",
        &["run"],
    ),
    (
        "126, 127",
        "lease run: the command is not executable, or was not found",
        &["run"],
    ),
    (
        "128+N",
        "lease latch --wait, lease run --rate --wait: signal N (SIGINT, SIGTERM, SIGHUP) \
         stopped the wait",
        &["latch", "run"],
    ),
    ("1", "any other failure", &[]),
];

/// The exit codes `command` gives (every command's, for `None`), and what each means.
pub fn codes(command: Option<&str>) -> Vec<(&'static str, &'static str)> {
    CODES
        .iter()
        .filter(|(_, _, of)| command.is_none_or(|command| of.is_empty() || of.contains(&command)))
        .map(|(code, meaning, _)| (*code, *meaning))
        .collect()
}

/// The exit code of a command whose output went to a closed stdout: the caller stopped reading.
pub fn printed(written: bool) -> ExitCode {
    if written {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(FAILED)
    }
}

/// A failure to report: one line on stderr, and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
    /// The library's error it comes from, if it does.
    pub cause: Option<redis_lease::Error>,
    /// A run skipped because its name is held elsewhere: said unless `-q` (as `flock -n`
    /// says nothing).
    pub skipped: bool,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
            cause: None,
            skipped: false,
        }
    }

    /// A run that did not start because its name is held (or led) elsewhere.
    pub fn skipped(message: impl Into<String>) -> Self {
        Failure {
            skipped: true,
            ..Failure::new(NOT_ACQUIRED, message)
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Failure::new(USAGE, message)
    }

    /// Logs the message (an error record: one line, `lease: <message>`) and gives the code; a
    /// skipped run's says nothing under `-q`.
    pub fn report(self) -> ExitCode {
        if !(self.skipped && crate::logger::quieted()) {
            log::error!("{}", self.message);
        }
        ExitCode::from(self.code)
    }
}

impl From<redis_lease::Error> for Failure {
    fn from(error: redis_lease::Error) -> Self {
        let code = match &error {
            // Too few replicas to count on now: as unreachable, worth trying again later.
            redis_lease::Error::Unavailable { .. } | redis_lease::Error::NotReplicated { .. } => {
                UNAVAILABLE
            }
            redis_lease::Error::Refused { .. } => REFUSED,
            redis_lease::Error::WrongType { .. } | redis_lease::Error::BadValue { .. } => DATA,
            redis_lease::Error::InvalidArgument(_) => USAGE,
            redis_lease::Error::Timeout { .. } => NOT_ACQUIRED,
            _ => FAILED,
        };
        Failure {
            code,
            message: error.to_string(),
            cause: Some(error),
            skipped: false,
        }
    }
}
