//! What a client did, one JSON object per line, stamped with `CLOCK_MONOTONIC` nanoseconds.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

/// One event of one client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// The client started: its owner id and process id.
    Start {
        t: u64,
        client: String,
        owner: String,
        pid: u32,
    },
    /// An acquisition was asked for.
    AcquireInvoke { t: u64, client: String },
    /// It was acquired, with this fencing token (0 under RedLock) and local deadline; `wall_ms`
    /// is the client's wall clock then (it may be faked, see the clock-jump scenario).
    AcquireOk {
        t: u64,
        client: String,
        token: u64,
        valid_until: u64,
        #[serde(default)]
        wall_ms: u64,
    },
    /// It was not acquired within the wait.
    AcquireFail { t: u64, client: String },
    /// The acquisition failed with an error.
    AcquireError {
        t: u64,
        client: String,
        error: String,
    },
    /// The client saw its hold's local deadline move: a renewal was confirmed.
    Renewed {
        t: u64,
        client: String,
        valid_until: u64,
    },
    /// A write to the fenced resource, and whether it was accepted.
    Write {
        t: u64,
        client: String,
        token: u64,
        accepted: bool,
    },
    /// An unfenced read-modify-write of the shared counter, done under the lock.
    Increment { t: u64, client: String },
    /// The client was told its hold is lost.
    Lost {
        t: u64,
        client: String,
        reason: String,
        valid_until: u64,
    },
    /// A release was asked for (the client no longer relies on the lock from here).
    ReleaseInvoke { t: u64, client: String },
    /// The release's outcome.
    ReleaseDone { t: u64, client: String, ok: bool },
}

impl Event {
    pub fn t(&self) -> u64 {
        match self {
            Event::Start { t, .. }
            | Event::AcquireInvoke { t, .. }
            | Event::AcquireOk { t, .. }
            | Event::AcquireFail { t, .. }
            | Event::AcquireError { t, .. }
            | Event::Renewed { t, .. }
            | Event::Write { t, .. }
            | Event::Increment { t, .. }
            | Event::Lost { t, .. }
            | Event::ReleaseInvoke { t, .. }
            | Event::ReleaseDone { t, .. } => *t,
        }
    }

    pub fn client(&self) -> &str {
        match self {
            Event::Start { client, .. }
            | Event::AcquireInvoke { client, .. }
            | Event::AcquireOk { client, .. }
            | Event::AcquireFail { client, .. }
            | Event::AcquireError { client, .. }
            | Event::Renewed { client, .. }
            | Event::Write { client, .. }
            | Event::Increment { client, .. }
            | Event::Lost { client, .. }
            | Event::ReleaseInvoke { client, .. }
            | Event::ReleaseDone { client, .. } => client,
        }
    }
}

/// Appends events to a history file, flushing each line (a client may be killed any time).
pub struct Recorder {
    out: BufWriter<File>,
}

impl Recorder {
    pub fn create(path: &Path) -> std::io::Result<Recorder> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Recorder {
            out: BufWriter::new(file),
        })
    }

    pub fn record(&mut self, event: &Event) {
        if let Ok(line) = serde_json::to_string(event) {
            let _ = writeln!(self.out, "{line}");
            let _ = self.out.flush();
        }
    }
}

/// Reads every history file and merges them in time order. Lines that do not parse (a client
/// killed in the middle of one) are skipped.
pub fn merge(paths: &[std::path::PathBuf]) -> Vec<Event> {
    let mut events: Vec<Event> = paths
        .iter()
        .filter_map(|path| File::open(path).ok())
        .flat_map(|file| {
            BufReader::new(file)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<_>>()
        })
        .filter_map(|line| serde_json::from_str(&line).ok())
        .collect();
    events.sort_by_key(Event::t);
    events
}
