//! A reference model of `Wheel` (a sorted map by deadline) and a checker that runs one sequence of
//! operations against both. Shared by the property test and the fuzz target.

use hashwheel::{Key, Wheel};
use std::collections::{BTreeMap, HashMap};

/// How far from the current tick an inserted deadline lies.
#[derive(Clone, Copy, Debug)]
pub enum Reach {
    /// Already past: `now - n`.
    Past(u64),
    /// Within a few rotations.
    Near(u64),
    /// Anywhere in the tick range.
    Far(u64),
    /// `u64::MAX - n`.
    End(u64),
}

#[derive(Clone, Copy, Debug)]
pub enum Op {
    Insert(Reach),
    /// Cancel the n-th key ever issued (modulo their count).
    Cancel(usize),
    /// Advance by n ticks and take everything due.
    Advance(u64),
    /// Advance by n ticks but take only the first `take` due entries.
    AdvancePartly(u64, usize),
    /// Jump to the end of time.
    AdvanceToEnd,
}

/// Turns raw bytes into operations, for the fuzzer.
pub fn ops_from_bytes(bytes: &[u8]) -> (usize, Vec<Op>) {
    let slots = 1usize << (bytes.first().copied().unwrap_or(3) % 17);
    let mut ops = Vec::new();
    for chunk in bytes.get(1..).unwrap_or(&[]).chunks(3) {
        let [kind, a, b] = [0, 1, 2].map(|i| u64::from(chunk.get(i).copied().unwrap_or(0)));
        let n = a << 8 | b;
        ops.push(match kind % 10 {
            0 | 1 => Op::Insert(Reach::Near(n % 4096)),
            2 => Op::Insert(Reach::Far(
                n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (a % 64),
            )),
            3 => Op::Insert(Reach::Past(n % 64)),
            4 => Op::Insert(Reach::End(n % 16)),
            5 | 6 => Op::Cancel(n as usize),
            7 => Op::Advance(n % 2048),
            8 => Op::AdvancePartly(n % 2048, (b % 8) as usize),
            _ if a == 255 => Op::AdvanceToEnd,
            _ => Op::Advance(n << (b % 40)),
        });
    }
    (slots, ops)
}

struct Model {
    now: u64,
    by_deadline: BTreeMap<(u64, u64), ()>,
    deadline_of: HashMap<u64, u64>,
}

/// Runs `ops` on a wheel of `slots` buckets and on the model; the first disagreement is the error.
pub fn check(slots: usize, ops: &[Op]) -> Result<(), String> {
    let mut wheel: Wheel<u64> = Wheel::new(slots).map_err(|e| e.to_string())?;
    let mut model = Model {
        now: 0,
        by_deadline: BTreeMap::new(),
        deadline_of: HashMap::new(),
    };
    let mut keys: Vec<(Key, u64)> = Vec::new();
    let mut next_id = 0u64;
    for (step, op) in ops.iter().enumerate() {
        let fail = |what: String| Err(format!("step {step} ({op:?}): {what}"));
        match *op {
            Op::Insert(reach) => {
                let deadline = match reach {
                    Reach::Past(n) => model.now.saturating_sub(n),
                    Reach::Near(n) => model.now.saturating_add(n),
                    Reach::Far(n) => model.now.saturating_add(n),
                    Reach::End(n) => u64::MAX - n,
                };
                let id = next_id;
                next_id += 1;
                let key = wheel
                    .insert(deadline, id)
                    .map_err(|_| "wheel full".to_owned())?;
                let due = deadline.max(model.now);
                model.by_deadline.insert((due, id), ());
                model.deadline_of.insert(id, due);
                keys.push((key, id));
            }
            Op::Cancel(n) => {
                if keys.is_empty() {
                    continue;
                }
                let (key, id) = keys[n % keys.len()];
                let expected = model.deadline_of.remove(&id).map(|due| {
                    model.by_deadline.remove(&(due, id));
                    id
                });
                let got = wheel.cancel(key);
                if got != expected {
                    return fail(format!("cancel gave {got:?}, model {expected:?}"));
                }
            }
            Op::Advance(by) => {
                let to = model.now.saturating_add(by);
                let got: Vec<(u64, u64)> = wheel.advance(to).collect();
                compare_expiry(&mut model, to, &got, None).or_else(fail)?;
            }
            Op::AdvancePartly(by, take) => {
                let to = model.now.saturating_add(by);
                let got: Vec<(u64, u64)> = wheel.advance(to).take(take).collect();
                compare_expiry(&mut model, to, &got, Some(take)).or_else(fail)?;
            }
            Op::AdvanceToEnd => {
                let got: Vec<(u64, u64)> = wheel.advance(u64::MAX).collect();
                compare_expiry(&mut model, u64::MAX, &got, None).or_else(fail)?;
            }
        }
        if wheel.len() != model.deadline_of.len() {
            return fail(format!(
                "len {} vs model {}",
                wheel.len(),
                model.deadline_of.len()
            ));
        }
        if wheel.now() != model.now {
            return fail(format!("now {} vs model {}", wheel.now(), model.now));
        }
        let earliest = model.by_deadline.keys().next().map(|&(due, _)| due);
        match (wheel.next_due(), earliest) {
            (None, None) => {}
            (Some(next), Some(earliest)) if next <= earliest => {}
            (next, earliest) => return fail(format!("next_due {next:?}, earliest {earliest:?}")),
        }
        for &(key, id) in &keys {
            if wheel.contains(key) != model.deadline_of.contains_key(&id) {
                return fail(format!("contains disagrees for id {id}"));
            }
        }
    }
    Ok(())
}

/// Checks what one `advance(to)` yielded: in deadline order, nothing early, nothing twice, and (if
/// the whole iterator was drained) nothing due left behind.
fn compare_expiry(
    model: &mut Model,
    to: u64,
    got: &[(u64, u64)],
    taken: Option<usize>,
) -> Result<(), String> {
    model.now = model.now.max(to);
    let mut previous = 0;
    for &(deadline, id) in got {
        if deadline < previous {
            return Err(format!(
                "deadline {deadline} after {previous}: out of order"
            ));
        }
        previous = deadline;
        match model.deadline_of.get(&id) {
            None => return Err(format!("id {id} expired but the model has none")),
            Some(&due) if due != deadline => {
                return Err(format!("id {id} expired at {deadline}, model says {due}"))
            }
            Some(&due) if due > model.now => {
                return Err(format!(
                    "id {id} expired early: due {due}, now {}",
                    model.now
                ))
            }
            Some(_) => {}
        }
    }
    // Everything due strictly before the last yielded deadline must have come out too.
    let must_be_out: Vec<u64> = match taken {
        Some(limit) if got.len() == limit => model
            .by_deadline
            .range(..(previous, 0))
            .map(|(&(_, id), _)| id)
            .collect(),
        _ => model
            .by_deadline
            .range(..=(model.now, u64::MAX))
            .map(|(&(_, id), _)| id)
            .collect(),
    };
    let yielded: std::collections::HashSet<u64> = got.iter().map(|&(_, id)| id).collect();
    if yielded.len() != got.len() {
        return Err("an id was yielded twice".to_owned());
    }
    if let Some(missing) = must_be_out.iter().find(|id| !yielded.contains(id)) {
        return Err(format!("id {missing} was due but not yielded"));
    }
    for &(deadline, id) in got {
        model.by_deadline.remove(&(deadline, id));
        model.deadline_of.remove(&id);
    }
    Ok(())
}
