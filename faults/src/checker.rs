//! The checker: from the merged histories, the resource's write log and the counter, the counts
//! that say whether mutual exclusion and fencing held.

use crate::history::Event;
use crate::resource::Logged;
use std::collections::HashMap;

/// When a client believed it held the lock: from its acquisition until it was told the hold was
/// lost or it began to release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub client: String,
    pub start: u64,
    pub end: u64,
}

/// What the checker found.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    /// Successful acquisitions.
    pub cycles: usize,
    /// Acquisitions that failed within their wait, or with an error.
    pub failed: usize,
    pub errors: usize,
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
}

/// Believed-hold windows, per client, in start order.
pub fn windows(events: &[Event]) -> Vec<Window> {
    let mut open: HashMap<&str, u64> = HashMap::new();
    let mut last_seen: HashMap<&str, u64> = HashMap::new();
    let mut windows = Vec::new();
    for event in events {
        last_seen.insert(event.client(), event.t());
        match event {
            Event::AcquireOk { t, client, .. } => {
                open.insert(client, *t);
            }
            Event::Lost { t, client, .. } | Event::ReleaseInvoke { t, client } => {
                if let Some(start) = open.remove(client.as_str()) {
                    windows.push(Window {
                        client: client.clone(),
                        start,
                        end: *t,
                    });
                }
            }
            _ => {}
        }
    }
    for (client, start) in open {
        let end = last_seen.get(client).copied().unwrap_or(start);
        windows.push(Window {
            client: client.to_owned(),
            start,
            end,
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

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q) as usize]
}

/// Checks a run: `fenced` when tokens are meaningful (one server, not RedLock); `faults` are the
/// windows (start, end) in which a fault was active.
pub fn check(
    events: &[Event],
    log: &[Logged],
    counter: u64,
    fenced: bool,
    faults: &[(u64, u64)],
) -> Findings {
    let mut findings = Findings::default();
    let windows = windows(events);
    for (i, first) in windows.iter().enumerate() {
        for second in windows[i + 1..].iter().take_while(|w| w.start < first.end) {
            if second.client != first.client {
                findings.overlaps += 1;
                let overlap = first.end.min(second.end) - second.start;
                findings.max_overlap_ms = findings.max_overlap_ms.max(overlap as f64 / 1e6);
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
            Event::AcquireOk { token, t, .. } => {
                findings.cycles += 1;
                acquired_at.push(*t);
                if fenced {
                    if *token <= last_token {
                        findings.token_violations += 1;
                    }
                    last_token = *token;
                    granted_max = granted_max.max(*token);
                }
            }
            Event::AcquireFail { .. } => findings.failed += 1,
            Event::AcquireError { .. } => findings.errors += 1,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(t: u64, client: &str, token: u64) -> Event {
        Event::AcquireOk {
            t,
            client: client.into(),
            token,
            valid_until: t + 1000,
            wall_ms: 0,
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
        let findings = check(&events, &[], 0, true, &[]);
        assert_eq!(findings.cycles, 3);
        assert_eq!(findings.overlaps, 1);
        assert!((findings.max_overlap_ms - 10e-6).abs() < 1e-9);
        assert_eq!(findings.token_violations, 1, "token 2 granted twice");
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
        let findings = check(&events, &log, 2, true, &[(25, 28)]);
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
        let findings = check(&events, &log, 1, true, &[]);
        assert_eq!(findings.lost_updates, 1);
        assert_eq!(findings.stale_accepted, 1);
    }
}
