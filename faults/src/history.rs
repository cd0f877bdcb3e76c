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
        /// What was taken: `""` a lock, `"permit"` a semaphore's, `"read"` or `"write"` a
        /// read-write lock's side.
        #[serde(default)]
        side: String,
    },
    /// It was not acquired within the wait.
    AcquireFail { t: u64, client: String },
    /// The acquisition failed with an error.
    AcquireError {
        t: u64,
        client: String,
        error: String,
        /// Whether it is one a wait rides out (`Error::is_retryable`: no answer, a failover,
        /// the lock still held), rather than one that needs a change first.
        #[serde(default = "retryable")]
        retryable: bool,
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
    /// An election's observer reported a change: the leader's term, or none.
    Observed {
        t: u64,
        client: String,
        term: Option<u64>,
    },
    /// The client's time was up, and it stopped.
    Done { t: u64, client: String },
    /// The client stopped before its time was up, on this error.
    Quit {
        t: u64,
        client: String,
        error: String,
    },
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
            | Event::ReleaseDone { t, .. }
            | Event::Observed { t, .. }
            | Event::Done { t, .. }
            | Event::Quit { t, .. } => *t,
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
            | Event::ReleaseDone { client, .. }
            | Event::Observed { client, .. }
            | Event::Done { client, .. }
            | Event::Quit { client, .. } => client,
        }
    }
}

/// Appends events to a history file, flushing each line (a client may be killed any time).
pub struct Recorder {
    out: BufWriter<File>,
}

impl Recorder {
    /// Appends to the history at `path`, made if missing. A line that a killed client left
    /// unfinished is ended first, so that it spoils no line of this recorder's.
    pub fn create(path: &Path) -> std::io::Result<Recorder> {
        let unfinished = std::fs::read(path)
            .ok()
            .and_then(|text| text.last().copied())
            .is_some_and(|last| last != b'\n');
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let mut out = BufWriter::new(file);
        if unfinished {
            writeln!(out)?;
            out.flush()?;
        }
        Ok(Recorder { out })
    }

    pub fn record(&mut self, event: &Event) {
        if let Ok(line) = serde_json::to_string(event) {
            let _ = writeln!(self.out, "{line}");
            let _ = self.out.flush();
        }
    }
}

/// A hold a client's history shows open: acquired, and neither told lost nor released since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenHold {
    /// The history file's index among those read.
    pub index: usize,
    pub client: String,
    /// The process id the client recorded when it started.
    pub pid: u32,
    /// When it acquired.
    pub since: u64,
}

/// The holds open now in the history files at `paths`, as far as they tell. Each file is one
/// client's: its first event (the start, with its process id) and its last acquisition, loss or
/// release say whether it holds. Only those events are parsed, from the file's end, so that
/// this can be called often while the clients run; a line still being written is skipped.
pub fn open_holds(paths: &[std::path::PathBuf]) -> Vec<OpenHold> {
    paths
        .iter()
        .enumerate()
        .filter_map(|(index, path)| {
            let text = std::fs::read_to_string(path).ok()?;
            let pid = match serde_json::from_str(text.lines().next()?).ok()? {
                Event::Start { pid, .. } => pid,
                _ => return None,
            };
            let last = text
                .lines()
                .rev()
                .filter(|line| {
                    ["acquire_ok", "lost", "release_invoke"]
                        .iter()
                        .any(|kind| line.contains(&format!("\"kind\":\"{kind}\"")))
                })
                .find_map(|line| serde_json::from_str::<Event>(line).ok())?;
            match last {
                Event::AcquireOk { t, client, .. } => Some(OpenHold {
                    index,
                    client,
                    pid,
                    since: t,
                }),
                _ => None,
            }
        })
        .collect()
}

/// Since when the client whose history is at `path` waits for the lock: the time of its last
/// acquisition asked for, if nothing came of it yet (it holds nothing then); `None` if it holds,
/// releases, or has stopped.
pub fn waiting_since(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let last = text
        .lines()
        .rev()
        .filter(|line| {
            [
                "acquire_invoke",
                "acquire_ok",
                "acquire_fail",
                "acquire_error",
                "lost",
                "release_invoke",
                "done",
                "quit",
            ]
            .iter()
            .any(|kind| line.contains(&format!("\"kind\":\"{kind}\"")))
        })
        .find_map(|line| serde_json::from_str::<Event>(line).ok())?;
    match last {
        Event::AcquireInvoke { t, .. } => Some(t),
        _ => None,
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

/// What a history written before errors were sorted says of one: nothing against it.
fn retryable() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_is_open_from_its_acquisition_until_it_is_lost_or_released() {
        let dir = tempfile_dir();
        let path = |name: &str| dir.join(name);
        let start = |client: &str, pid| Event::Start {
            t: 1,
            client: client.into(),
            owner: format!("owner-{client}"),
            pid,
        };
        let ok = |t, client: &str| Event::AcquireOk {
            t,
            client: client.into(),
            token: t,
            valid_until: t + 1000,
            wall_ms: 0,
            side: String::new(),
        };
        let write = |name: &str, events: &[Event]| {
            let mut recorder = Recorder::create(&path(name)).expect("a history file");
            events.iter().for_each(|event| recorder.record(event));
        };
        write(
            "held.jsonl",
            &[
                start("a", 7),
                ok(10, "a"),
                Event::Increment {
                    t: 11,
                    client: "a".into(),
                },
            ],
        );
        write(
            "released.jsonl",
            &[
                start("b", 8),
                ok(20, "b"),
                Event::ReleaseInvoke {
                    t: 21,
                    client: "b".into(),
                },
            ],
        );
        write(
            "lost.jsonl",
            &[
                start("c", 9),
                ok(30, "c"),
                Event::Lost {
                    t: 31,
                    client: "c".into(),
                    reason: "Unconfirmed".into(),
                    valid_until: 30,
                },
            ],
        );
        std::fs::write(
            path("cut.jsonl"),
            "{\"kind\":\"start\",\"t\":1,\"client\":\"d\",\"owner\":\"o\",\"pid\":10}\n{\"kind\":\"acquire_ok\",\"t\":40,\"cli",
        )
        .expect("a history file");
        let paths: Vec<_> = ["released.jsonl", "held.jsonl", "lost.jsonl", "cut.jsonl"]
            .iter()
            .map(|name| path(name))
            .collect();
        let open = open_holds(&paths);
        assert_eq!(
            open,
            [OpenHold {
                index: 1,
                client: "a".into(),
                pid: 7,
                since: 10,
            }]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_client_waits_from_its_last_acquisition_asked_for_until_something_comes_of_it() {
        let dir = tempfile_dir();
        let path = dir.join("waiting.jsonl");
        let mut recorder = Recorder::create(&path).expect("a history file");
        let invoke = |t| Event::AcquireInvoke {
            t,
            client: "a".into(),
        };
        assert_eq!(waiting_since(&path), None, "an empty history");
        recorder.record(&invoke(5));
        assert_eq!(waiting_since(&path), Some(5));
        recorder.record(&Event::AcquireFail {
            t: 6,
            client: "a".into(),
        });
        assert_eq!(waiting_since(&path), None, "its wait ended");
        recorder.record(&invoke(7));
        recorder.record(&Event::AcquireOk {
            t: 8,
            client: "a".into(),
            token: 1,
            valid_until: 1000,
            wall_ms: 0,
            side: String::new(),
        });
        assert_eq!(waiting_since(&path), None, "it holds");
        recorder.record(&Event::ReleaseInvoke {
            t: 9,
            client: "a".into(),
        });
        recorder.record(&invoke(10));
        assert_eq!(waiting_since(&path), Some(10));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_line_a_killed_client_left_unfinished_spoils_none_of_the_next_recorders() {
        let dir = tempfile_dir();
        let path = dir.join("killed.jsonl");
        std::fs::write(
            &path,
            "{\"kind\":\"acquire_invoke\",\"t\":1,\"client\":\"a\"}\n{\"kind\":\"acq",
        )
        .expect("a history file");
        let mut recorder = Recorder::create(&path).expect("the same history");
        recorder.record(&Event::Done {
            t: 2,
            client: "a".into(),
        });
        let events = merge(&[path]);
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(matches!(events[1], Event::Done { t: 2, .. }));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "faults-history-test-{}-{}",
            std::process::id(),
            crate::clock::now_ns()
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        dir
    }
}
