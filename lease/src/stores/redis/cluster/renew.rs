//! Renewals on a cluster: a script's keys must share one slot, so the leases of a round are
//! grouped by slot into one renewal call each, and the calls for one master are written to it in
//! one pipeline: a round costs one round trip per master, however many leases and slots. The
//! pipelines to all masters are written before any reply is read.
//!
//! A slot whose call is redirected (`MOVED`, `ASK`, a cluster that is down) has its leases tried
//! again before their deadlines, as after any failed call; the slot map is read again first.

use super::routes::Routes;
use super::slots::slot;
use crate::backend::{Renewal, Renewed, Renewer};
use crate::stores::redis::conn::Conn;
use crate::stores::redis::pool::Pooled;
use crate::stores::redis::scripts::{self, Acks, Call};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

pub(super) struct ClusterRenewer {
    routes: Arc<Routes>,
}

impl ClusterRenewer {
    pub(super) fn new(routes: Arc<Routes>) -> ClusterRenewer {
        ClusterRenewer { routes }
    }
}

/// Each slot's call to one master, the slot, and the indices of its leases.
type Calls = [(Call, usize, Vec<usize>)];

/// The calls for one master: each slot's call, the slot, and the indices of its leases; and
/// the acknowledgements they wait for (a `WAIT` written behind them).
struct Batch<'a> {
    conn: Option<Pooled<'a>>,
    calls: Vec<(Call, usize, Vec<usize>)>,
    acks: Option<Acks>,
}

impl Renewer for ClusterRenewer {
    fn renew(&mut self, leases: &[Renewal<'_>]) -> Vec<Renewed> {
        let deadline = Instant::now() + self.routes.command_timeout();
        let mut outcome = vec![Renewed::Failed; leases.len()];
        let mut by_slot: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (index, lease) in leases.iter().enumerate() {
            by_slot.entry(slot(lease.address)).or_default().push(index);
        }
        // Slot -> node; the pools live in the routes, held here while their connections are.
        let mut by_node: BTreeMap<Arc<str>, (Arc<crate::stores::redis::pool::Pool>, Vec<usize>)> =
            BTreeMap::new();
        let mut slots: Vec<(usize, Vec<usize>)> = Vec::new();
        for (slot, indices) in by_slot {
            match self.routes.node(slot, deadline) {
                Ok((name, pool)) => {
                    let entry = by_node.entry(name).or_insert_with(|| (pool, Vec::new()));
                    entry.1.push(slots.len());
                }
                Err(error) => log::warn!("renewing leases of slot {slot}: {error}"),
            }
            slots.push((slot, indices));
        }
        let mut batches: Vec<Batch<'_>> = Vec::new();
        for (pool, slot_indices) in by_node.values() {
            let calls: Vec<(Call, usize, Vec<usize>)> = slot_indices
                .iter()
                .map(|&at| {
                    let (slot, indices) = (slots[at].0, slots[at].1.clone());
                    let renewals: Vec<Renewal<'_>> = indices.iter().map(|&i| leases[i]).collect();
                    (scripts::renew(&renewals), slot, indices)
                })
                .collect();
            let acks = pool.acks();
            let mut bytes: Vec<u8> = calls.iter().flat_map(|(call, _, _)| call.bytes()).collect();
            if let Some(acks) = acks {
                bytes.extend(acks.wait_bytes());
            }
            let conn = pool.get(deadline).and_then(|mut conn| {
                conn.send(&bytes)
                    .map_err(|error| crate::Error::unavailable(error).at(conn.server()))?;
                Ok(conn)
            });
            match conn {
                Ok(conn) => batches.push(Batch {
                    conn: Some(conn),
                    calls,
                    acks,
                }),
                Err(error) => {
                    log::warn!("renewing {} leases failed: {error}", calls.len());
                    self.routes.mark_stale();
                }
            }
        }
        for batch in &mut batches {
            let Some(conn) = batch.conn.as_mut() else {
                continue;
            };
            let sent = (batch.calls.as_slice(), batch.acks);
            if let Err(error) = read(conn, sent, &self.routes, &mut outcome) {
                log::warn!(
                    "renewing leases failed: {error}; each is tried again before its deadline"
                );
                self.routes.mark_stale();
            }
        }
        outcome
    }
}

/// Reads one reply per call; a call the server did not have the script for is sent again after
/// loading it, and a call redirected (`MOVED`) moves its slot in the map, so that the retry goes
/// to the slot's new master. With acknowledgements required, the calls count only if the `WAIT`
/// behind them was met (and a call sent again after loading its script is tried next round).
fn read(
    conn: &mut Conn,
    (calls, acks): (&Calls, Option<Acks>),
    routes: &Routes,
    outcome: &mut [Renewed],
) -> redis::RedisResult<()> {
    let mut again = Vec::new();
    let mut replies = Vec::new();
    for (call, slot, indices) in calls {
        match conn.receive()?.extract_error() {
            Ok(reply) => replies.push((reply, indices)),
            Err(error) if scripts::is_noscript(&error) => again.push((call, indices)),
            Err(error) => {
                if let (Some("MOVED"), Some(node)) =
                    (error.code(), super::slots::redirect_target(&error))
                {
                    routes.moved(*slot, &node);
                } else {
                    routes.mark_stale();
                }
                // These leases are tried again before their deadlines.
            }
        }
    }
    if let Some(acks) = acks {
        let acked = match conn.receive()?.extract_error()? {
            redis::Value::Int(acked) => u64::try_from(acked).unwrap_or(0),
            _ => 0,
        };
        if let Some(short) = acks.shortfall(acked) {
            log::warn!(
                "renewals acknowledged by {} of {} replicas: tried again before their deadlines",
                short.acked,
                short.wanted
            );
            return Ok(());
        }
        for (reply, indices) in replies {
            apply(&reply, indices, outcome);
        }
        for (call, _) in again {
            // Loaded for the next round.
            let _ = call.load(conn);
        }
        return Ok(());
    }
    for (reply, indices) in replies {
        apply(&reply, indices, outcome);
    }
    for (call, indices) in again {
        if let Ok(reply) = call.invoke(conn) {
            apply(&reply, indices, outcome);
        }
    }
    Ok(())
}

fn apply(reply: &redis::Value, indices: &[usize], outcome: &mut [Renewed]) {
    if let Ok(flags) = scripts::parse_renew(reply, indices.len()) {
        for (&index, renewed) in indices.iter().zip(flags) {
            outcome[index] = if renewed { Renewed::Yes } else { Renewed::Gone };
        }
    }
}
