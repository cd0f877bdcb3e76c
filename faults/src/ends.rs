//! Which of a scenario's clients ended before their time, and why: a client process that exited
//! with a failure or had to be killed, or a worker of one (a thread, a client of its own in the
//! histories) whose history does not end with its run done. The checker reads the work of the
//! clients that ran; one that ended early leaves the checks covering fewer clients than the
//! scenario ran, so the scenario fails. No fault of the suite ends a client by design: a frozen
//! or cut-off client runs on once the fault is healed.

use crate::history::Event;
use std::collections::HashMap;
use std::fmt;
use std::process::ExitStatus;

/// How a client process of a scenario ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// By itself, with this status.
    Exited(ExitStatus),
    /// Killed by the scenario, still running long after its time.
    Killed,
}

/// A client process, or a worker of one, that ended before its time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlyEnd {
    /// The process (`c2`) or the worker (`c2.1`, worker 1 of `c2`).
    pub who: String,
    pub why: String,
}

impl fmt::Display for EarlyEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.who, self.why)
    }
}

/// A worker's last word in its history.
enum Word<'a> {
    Started,
    Done,
    Quit(&'a str),
}

/// The early ends among client processes that ended as `exits` (each with its name), each of
/// whose `threads` workers `NAME.K` wrote its history into `events`.
pub fn early(exits: &[(String, Exit)], threads: usize, events: &[Event]) -> Vec<EarlyEnd> {
    let mut words: HashMap<&str, Word<'_>> = HashMap::new();
    for event in events {
        match event {
            Event::Start { client, .. } => {
                words.entry(client).or_insert(Word::Started);
            }
            Event::Done { client, .. } => {
                words.insert(client, Word::Done);
            }
            Event::Quit { client, error, .. } => {
                words.insert(client, Word::Quit(error));
            }
            _ => {}
        }
    }
    let mut ends = Vec::new();
    for (process, exit) in exits {
        let why = match exit {
            Exit::Exited(status) if status.success() => None,
            Exit::Exited(status) => Some(format!("ended with {status}")),
            Exit::Killed => Some("still running long after its time: killed".to_owned()),
        };
        ends.extend(why.map(|why| EarlyEnd {
            who: process.clone(),
            why,
        }));
        for k in 0..threads {
            let worker = format!("{process}.{k}");
            let why = match words.get(worker.as_str()) {
                Some(Word::Done) => continue,
                Some(Word::Quit(error)) => format!("quit: {error}"),
                Some(Word::Started) => "its history stops before its run was done".to_owned(),
                None => "never started".to_owned(),
            };
            ends.push(EarlyEnd { who: worker, why });
        }
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn start(client: &str) -> Event {
        Event::Start {
            t: 1,
            client: client.into(),
            owner: format!("owner-{client}"),
            pid: 7,
        }
    }

    fn done(client: &str) -> Event {
        Event::Done {
            t: 9,
            client: client.into(),
        }
    }

    fn exited(name: &str, code: i32) -> (String, Exit) {
        (name.into(), Exit::Exited(ExitStatus::from_raw(code << 8)))
    }

    fn said(ends: &[EarlyEnd]) -> Vec<String> {
        ends.iter().map(EarlyEnd::to_string).collect()
    }

    #[test]
    fn clients_whose_workers_all_ran_their_time_ended_on_time() {
        let events = [start("c0.0"), start("c0.1"), done("c0.0"), done("c0.1")];
        assert_eq!(early(&[exited("c0", 0)], 2, &events), []);
    }

    #[test]
    fn a_worker_that_quit_on_an_error_is_named_with_the_error() {
        let events = [
            start("c2.0"),
            start("c2.1"),
            Event::Quit {
                t: 5,
                client: "c2.1".into(),
                error: "Interrupted system call (os error 4)".into(),
            },
            done("c2.0"),
        ];
        assert_eq!(
            said(&early(&[exited("c2", 1)], 2, &events)),
            [
                "c2: ended with exit status: 1",
                "c2.1: quit: Interrupted system call (os error 4)"
            ]
        );
    }

    #[test]
    fn a_killed_client_and_workers_that_never_ended_or_never_started_are_named() {
        let events = [start("c0.0"), done("c0.0"), start("c1.0")];
        let exits = [
            exited("c0", 0),
            ("c1".to_owned(), Exit::Killed),
            ("c2".to_owned(), Exit::Exited(ExitStatus::from_raw(9))),
        ];
        assert_eq!(
            said(&early(&exits, 1, &events)),
            [
                "c1: still running long after its time: killed",
                "c1.0: its history stops before its run was done",
                "c2: ended with signal: 9 (SIGKILL)",
                "c2.0: never started",
            ]
        );
    }
}
