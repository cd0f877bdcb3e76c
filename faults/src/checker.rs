//! The checker: from the merged histories, the resource's write log and the counter, the counts
//! that say whether mutual exclusion and fencing held.

use crate::history::Event;
use crate::primitive::Primitive;
use crate::resource::Logged;
use std::collections::HashMap;

/// When a client believed it held the lock: from its acquisition until it was told the hold was
/// lost or it began to release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub client: String,
    pub start: u64,
    pub end: u64,
    /// What was held (see `Event::AcquireOk`).
    pub side: String,
}

/// What the checker found.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    /// Successful acquisitions.
    pub cycles: usize,
    /// Acquisitions that failed within their wait, or with an error.
    pub failed: usize,
    pub errors: usize,
    /// Acquisitions that failed with an error a wait does not ride out (one that needs a
    /// change first: refused, a protocol error, bad data), and the first such error.
    pub unexpected_errors: usize,
    pub first_unexpected: Option<String>,
    /// Pairs of believed-hold windows of different clients that overlap, and the longest overlap.
    pub overlaps: usize,
    pub max_overlap_ms: f64,
    /// Writes the store accepted with a token lower than one it had accepted before (the store's
    /// own check failing: must be 0 whatever the faults).
    pub stale_accepted: usize,
    /// Writes the store refused as stale: fencing at work.
    pub stale_rejected: usize,
    /// Writes accepted from a holder after a higher token had been granted to another (allowed
    /// by fencing when the newer holder has not written yet).
    pub superseded_accepted: usize,
    /// Fencing tokens of fresh acquisitions that did not rise strictly, in time order.
    pub token_violations: usize,
    /// Increments done under the lock that the counter does not show.
    pub lost_updates: i64,
    /// Renewals the holders saw confirmed (their deadline moving on).
    pub renewals: usize,
    /// Holders told their hold was lost.
    pub lost_told: usize,
    /// Releases that failed (not the owner any more, or no answer).
    pub release_failed: usize,
    /// For "no renewal confirmed" losses: how long after the local deadline the client noticed,
    /// p50 and max, in ms (the client looks between steps, so this includes its step time).
    pub lost_lateness_ms: Option<(f64, f64)>,
    /// Time from the end of each fault to the next acquisition by anyone, max, in ms.
    pub recovery_max_ms: Option<f64>,
    /// Changes an election's observers reported, and those that went back: a term below one
    /// the same observer reported before, or a term again after it reported its end.
    pub observed: usize,
    pub observer_regressions: usize,
}

/// Believed-hold windows, per client, in start order.
pub fn windows(events: &[Event]) -> Vec<Window> {
    let mut open: HashMap<&str, (u64, &str)> = HashMap::new();
    let mut last_seen: HashMap<&str, u64> = HashMap::new();
    let mut windows = Vec::new();
    for event in events {
        last_seen.insert(event.client(), event.t());
        match event {
            Event::AcquireOk {
                t, client, side, ..
            } => {
                open.insert(client, (*t, side));
            }
            Event::Lost { t, client, .. } | Event::ReleaseInvoke { t, client } => {
                if let Some((start, side)) = open.remove(client.as_str()) {
                    windows.push(Window {
                        client: client.clone(),
                        start,
                        end: *t,
                        side: side.to_owned(),
                    });
                }
            }
            _ => {}
        }
    }
    for (client, (start, side)) in open {
        let end = last_seen.get(client).copied().unwrap_or(start);
        windows.push(Window {
            client: client.to_owned(),
            start,
            end,
            side: side.to_owned(),
        });
    }
    windows.sort_by_key(|window| window.start);
    windows
}

/// Whether clients saw a fault active from `window.0` to `window.1`, up to `after` ns past its
/// end: an acquisition that failed with an error, a hold told lost, a release that failed, or a
/// write the fenced store refused. `events` are in time order.
pub fn seen(events: &[Event], window: (u64, u64), after: u64) -> bool {
    let (start, end) = window;
    let first = events.partition_point(|event| event.t() < start);
    events[first..]
        .iter()
        .take_while(|event| event.t() <= end + after)
        .any(|event| {
            matches!(
                event,
                Event::AcquireError { .. }
                    | Event::Lost { .. }
                    | Event::ReleaseDone { ok: false, .. }
                    | Event::Write {
                        accepted: false,
                        ..
                    }
            )
        })
}

/// Whether clients were handed fencing tokens of a newer ZooKeeper epoch (a zxid's high 32 bits,
/// which every newly elected leader raises) from `window.0` to `after` ns past `window.1` than
/// any before it (`false` if none was handed out before). `events` are in time order.
pub fn new_epoch(events: &[Event], window: (u64, u64), after: u64) -> bool {
    let (start, end) = window;
    let epoch = |event: &Event| match event {
        Event::AcquireOk { token, .. } => Some(token >> 32),
        _ => None,
    };
    let first = events.partition_point(|event| event.t() < start);
    let Some(before) = events[..first].iter().filter_map(epoch).max() else {
        return false;
    };
    events[first..]
        .iter()
        .take_while(|event| event.t() <= end + after)
        .filter_map(epoch)
        .any(|during| during > before)
}

/// Counts each time more than `permits` windows were open at once, and the longest such time.
fn excess(windows: &[Window], permits: usize, findings: &mut Findings) {
    // Opens before closes at one instant: a hold that starts as another ends overlaps it.
    let mut edges: Vec<(u64, bool)> = windows
        .iter()
        .flat_map(|window| [(window.start, false), (window.end, true)])
        .collect();
    edges.sort_unstable();
    let (mut open, mut over_since) = (0usize, None);
    for (t, closes) in edges {
        if closes {
            open = open.saturating_sub(1);
            if open <= permits {
                if let Some(since) = over_since.take() {
                    findings.max_overlap_ms = findings.max_overlap_ms.max((t - since) as f64 / 1e6);
                }
            }
        } else {
            open += 1;
            if open > permits && over_since.is_none() {
                findings.overlaps += 1;
                over_since = Some(t);
            }
        }
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q) as usize]
}

/// Checks a run of clients taking `primitive`: `fenced` when tokens are meaningful (one server,
/// not RedLock); `faults` are the windows (start, end) in which a fault was active.
///
/// What counts as an overlap: for a lock, two windows of different clients that overlap; for a
/// read-write lock, a writer's window and any other client's; for a semaphore of N permits, each
/// time more than N windows are open at once (the excess counted from when the N+1-th opened).
/// Tokens must rise among the holds that exclude each other (a lock's, a writer's): a
/// semaphore's and readers' holds are granted side by side, and the order they are recorded in
/// is not the order they were granted in.
pub fn check(
    events: &[Event],
    log: &[Logged],
    counter: u64,
    fenced: bool,
    faults: &[(u64, u64)],
    primitive: Primitive,
) -> Findings {
    let mut findings = Findings::default();
    let windows = windows(events);
    match primitive {
        Primitive::Semaphore(permits) => excess(&windows, permits as usize, &mut findings),
        Primitive::Lock | Primitive::ReadWrite | Primitive::Election => {
            for (i, first) in windows.iter().enumerate() {
                for second in windows[i + 1..].iter().take_while(|w| w.start < first.end) {
                    let excludes =
                        primitive.exclusive(&first.side) || primitive.exclusive(&second.side);
                    if second.client != first.client && excludes {
                        findings.overlaps += 1;
                        let overlap = first.end.min(second.end) - second.start;
                        findings.max_overlap_ms = findings.max_overlap_ms.max(overlap as f64 / 1e6);
                    }
                }
            }
        }
    }
    let mut highest = 0;
    for entry in log {
        if entry.accepted {
            if entry.token < highest {
                findings.stale_accepted += 1;
            }
            highest = highest.max(entry.token);
        } else {
            findings.stale_rejected += 1;
        }
    }
    let mut granted_max = 0;
    let mut last_token = 0;
    let mut increments = 0i64;
    let mut lateness = Vec::new();
    let mut acquired_at = Vec::new();
    for event in events {
        match event {
            Event::AcquireOk { token, t, side, .. } => {
                findings.cycles += 1;
                acquired_at.push(*t);
                if fenced && primitive.exclusive(side) {
                    if *token <= last_token {
                        findings.token_violations += 1;
                    }
                    last_token = *token;
                    granted_max = granted_max.max(*token);
                }
            }
            Event::AcquireFail { .. } => findings.failed += 1,
            Event::AcquireError {
                error, retryable, ..
            } => {
                findings.errors += 1;
                if !retryable {
                    findings.unexpected_errors += 1;
                    findings
                        .first_unexpected
                        .get_or_insert_with(|| error.clone());
                }
            }
            Event::Write {
                token,
                accepted: true,
                ..
            } if *token < granted_max => findings.superseded_accepted += 1,
            Event::Increment { .. } => increments += 1,
            Event::Renewed { .. } => findings.renewals += 1,
            Event::ReleaseDone { ok: false, .. } => findings.release_failed += 1,
            Event::Lost {
                t,
                reason,
                valid_until,
                ..
            } => {
                findings.lost_told += 1;
                if reason == "Unconfirmed" {
                    lateness.push(t.saturating_sub(*valid_until) as f64 / 1e6);
                }
            }
            _ => {}
        }
    }
    (findings.observed, findings.observer_regressions) = observers(events);
    findings.lost_updates = increments - counter as i64;
    lateness.sort_by(f64::total_cmp);
    if !lateness.is_empty() {
        findings.lost_lateness_ms =
            Some((percentile(&lateness, 0.5), lateness[lateness.len() - 1]));
    }
    let recoveries: Vec<f64> = faults
        .iter()
        .filter_map(|&(_, end)| {
            let next = acquired_at.iter().find(|&&t| t >= end)?;
            Some((next - end) as f64 / 1e6)
        })
        .collect();
    findings.recovery_max_ms = recoveries.into_iter().reduce(f64::max);
    findings
}

/// How many changes the observers reported, and how many of them went back (see
/// [`Findings::observer_regressions`]), each observer's in the order it reported them.
fn observers(events: &[Event]) -> (usize, usize) {
    // Per observer: the newest term reported, and whether its end was reported since.
    let mut seen: HashMap<&str, (u64, bool)> = HashMap::new();
    let (mut observed, mut regressions) = (0, 0);
    for event in events {
        let Event::Observed { client, term, .. } = event else {
            continue;
        };
        observed += 1;
        let (newest, over) = seen.entry(client).or_insert((0, false));
        match term {
            Some(term) if *term < *newest || (*term == *newest && *over) => regressions += 1,
            Some(term) => (*newest, *over) = (*term, false),
            None => *over = true,
        }
    }
    (observed, regressions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(t: u64, client: &str, term: Option<u64>) -> Event {
        Event::Observed {
            t,
            client: client.into(),
            term,
        }
    }

    #[test]
    fn an_observer_that_goes_back_to_an_older_term_or_an_ended_one_is_found() {
        let fine = [
            observed(1, "a", None),
            observed(2, "a", Some(3)),
            observed(3, "b", Some(3)),
            observed(4, "a", None),
            observed(5, "a", Some(7)),
            observed(6, "b", Some(7)),
        ];
        assert_eq!(observers(&fine), (6, 0));
        let older = [observed(1, "a", Some(7)), observed(2, "a", Some(3))];
        assert_eq!(observers(&older), (2, 1));
        let ended = [
            observed(1, "a", Some(7)),
            observed(2, "a", None),
            observed(3, "a", Some(7)),
        ];
        assert_eq!(observers(&ended), (3, 1));
    }

    fn ok(t: u64, client: &str, token: u64) -> Event {
        Event::AcquireOk {
            t,
            client: client.into(),
            token,
            valid_until: t + 1000,
            wall_ms: 0,
            side: String::new(),
        }
    }

    fn release(t: u64, client: &str) -> Event {
        Event::ReleaseInvoke {
            t,
            client: client.into(),
        }
    }

    #[test]
    fn overlapping_holds_and_backward_tokens_are_counted() {
        let events = vec![
            ok(10, "a", 1),
            ok(20, "b", 2),
            release(30, "a"),
            release(40, "b"),
            ok(50, "c", 2),
            release(60, "c"),
        ];
        let findings = check(&events, &[], 0, true, &[], Primitive::Lock);
        assert_eq!(findings.cycles, 3);
        assert_eq!(findings.overlaps, 1);
        assert!((findings.max_overlap_ms - 10e-6).abs() < 1e-9);
        assert_eq!(findings.token_violations, 1, "token 2 granted twice");
    }

    fn side(t: u64, client: &str, token: u64, side: &str) -> Event {
        let Event::AcquireOk {
            t,
            client,
            token,
            valid_until,
            wall_ms,
            ..
        } = ok(t, client, token)
        else {
            unreachable!()
        };
        Event::AcquireOk {
            t,
            client,
            token,
            valid_until,
            wall_ms,
            side: side.into(),
        }
    }

    #[test]
    fn a_semaphore_counts_only_holders_past_its_permits() {
        let events = vec![
            side(10, "a", 1, "permit"),
            side(11, "b", 3, "permit"),
            side(12, "c", 2, "permit"),
            release(20, "a"),
            side(25, "d", 4, "permit"),
            release(30, "b"),
            release(31, "c"),
            release(40, "d"),
        ];
        let three = check(&events, &[], 0, true, &[], Primitive::Semaphore(3));
        assert_eq!((three.overlaps, three.token_violations), (0, 0));
        let two = check(&events, &[], 0, true, &[], Primitive::Semaphore(2));
        assert_eq!(two.overlaps, 2, "c over 2 from 12, d from 25");
        assert!((two.max_overlap_ms - 8e-6).abs() < 1e-9);
    }

    #[test]
    fn readers_share_and_a_writer_beside_anyone_is_an_overlap() {
        let events = vec![
            side(10, "a", 1, "read"),
            side(11, "b", 2, "read"),
            release(20, "a"),
            release(21, "b"),
            side(30, "c", 3, "write"),
            side(35, "d", 4, "read"),
            release(40, "c"),
            release(41, "d"),
        ];
        let findings = check(&events, &[], 0, true, &[], Primitive::ReadWrite);
        assert_eq!(findings.overlaps, 1, "the reader beside the writer");
    }

    #[test]
    fn a_clean_history_has_nothing_to_report() {
        let events = vec![
            ok(10, "a", 1),
            Event::Increment {
                t: 12,
                client: "a".into(),
            },
            release(20, "a"),
            ok(30, "b", 2),
            Event::Increment {
                t: 32,
                client: "b".into(),
            },
            release(40, "b"),
        ];
        let log = vec![
            Logged {
                accepted: true,
                token: 1,
                client: "a".into(),
            },
            Logged {
                accepted: false,
                token: 1,
                client: "a".into(),
            },
            Logged {
                accepted: true,
                token: 2,
                client: "b".into(),
            },
        ];
        let findings = check(&events, &log, 2, true, &[(25, 28)], Primitive::Lock);
        assert_eq!(findings.overlaps, 0);
        assert_eq!(findings.lost_updates, 0);
        assert_eq!(findings.stale_accepted, 0);
        assert_eq!(findings.stale_rejected, 1);
        assert_eq!(
            findings.recovery_max_ms,
            Some(2e-6),
            "acquired 2 ns after the fault ended"
        );
    }

    #[test]
    fn a_fault_is_seen_by_a_symptom_in_its_window_or_shortly_after() {
        let lost = |t| Event::Lost {
            t,
            client: "a".into(),
            reason: "Unconfirmed".into(),
            valid_until: t,
        };
        let events = vec![ok(10, "a", 1), lost(50), release(60, "a")];
        assert!(seen(&events, (40, 45), 10), "lost 5 ns after the end");
        assert!(!seen(&events, (40, 45), 4), "too late to be this fault's");
        assert!(!seen(&events, (55, 70), 10), "before the fault");
        assert!(
            !seen(&events[..1], (0, 100), 0),
            "an acquisition is no symptom"
        );
    }

    #[test]
    fn a_new_leader_shows_in_the_epoch_of_the_tokens_handed_out() {
        let epoch = |epoch: u64, counter: u64| (epoch << 32) | counter;
        let events = vec![
            ok(10, "a", epoch(1, 5)),
            ok(20, "b", epoch(1, 9)),
            ok(50, "c", epoch(2, 1)),
        ];
        assert!(new_epoch(&events, (15, 40), 10), "epoch 2 after epoch 1");
        assert!(
            !new_epoch(&events, (15, 30), 10),
            "too late to be this fault's"
        );
        assert!(
            !new_epoch(&events, (0, 25), 10),
            "no token before to compare with"
        );
        assert!(!new_epoch(&events, (55, 60), 10), "none handed out after");
    }

    #[test]
    fn lost_updates_and_stale_acceptances_are_counted() {
        let events = vec![
            ok(10, "a", 1),
            Event::Increment {
                t: 12,
                client: "a".into(),
            },
            Event::Increment {
                t: 13,
                client: "a".into(),
            },
            release(20, "a"),
        ];
        let log = vec![
            Logged {
                accepted: true,
                token: 5,
                client: "b".into(),
            },
            Logged {
                accepted: true,
                token: 4,
                client: "a".into(),
            },
        ];
        let findings = check(&events, &log, 1, true, &[], Primitive::Lock);
        assert_eq!(findings.lost_updates, 1);
        assert_eq!(findings.stale_accepted, 1);
    }
}
