//! `lease status` and `lease unlock --force`: an operator's view of a lock, and its last resort.
//! Both work on a full server and on keys that hold something a lock cannot use.

use crate::exit::{self, printed, Failure};
use crate::primitive::PrimitiveArgs;
use crate::say::out;
use clap::Args;
use redis_lease::{Client, LockState};
use std::process::ExitCode;

#[derive(Args)]
pub struct StatusArgs {
    /// The lock's name
    name: String,
    /// Print one JSON object instead of a sentence
    #[arg(long)]
    json: bool,
    /// NAME is a leader election (as `lease run --value` leads): show its leader's owner id,
    /// term and value
    #[arg(long, conflicts_with_all = ["permits", "read", "write", "fair"])]
    election: bool,
    #[command(flatten)]
    primitive: PrimitiveArgs,
}

#[derive(Args)]
pub struct UnlockArgs {
    /// The lock's name
    name: String,
    #[command(flatten)]
    primitive: PrimitiveArgs,
    /// Required: the lock is removed whoever holds it, and the holder is not told
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
pub struct ResizeArgs {
    /// The semaphore's name
    name: String,
    /// The new number of permits, which every run must then declare while permits are held
    #[arg(long, value_name = "N")]
    permits: u32,
}

/// Makes N the semaphore's number of permits, whoever holds permits now.
pub fn resize(client: &Client, args: ResizeArgs) -> Result<ExitCode, Failure> {
    let before = client
        .semaphore(&args.name, args.permits)?
        .resize(args.permits)?;
    let was = before.map_or_else(|| "none stored before".to_owned(), |n| format!("was {n}"));
    Ok(printed(out(&format!(
        "{:?}: {} permits ({was})",
        args.name, args.permits
    ))))
}

pub fn status(client: &Client, args: StatusArgs) -> Result<ExitCode, Failure> {
    let (state, primitive, noun) = if args.election {
        let state = client.election(&args.name)?.inspect()?;
        (state, args.primitive, "election")
    } else {
        let state = args.primitive.lock(client, &args.name)?.inspect()?;
        match semaphore_instead(client, &args, &state)? {
            Some((state, primitive)) => (state, primitive, "semaphore"),
            None => {
                let noun = args.primitive.noun();
                (state, args.primitive, noun)
            }
        }
    };
    let text = if args.json {
        json(&state, &primitive, noun).to_string()
    } else {
        describe(&state, &primitive, noun)
    };
    // Scripts ask `lease status NAME` as they ask `test`: 0 when held, 1 when free; a name that
    // is neither (keys a lock cannot use, tokens exhausted) has a code of its own.
    let written = out(&text);
    Ok(if !written {
        printed(written)
    } else if !state.problems.is_empty() || state.tokens_exhausted() {
        ExitCode::from(exit::DATA)
    } else if !state.is_held() {
        ExitCode::from(exit::FREE)
    } else {
        printed(written)
    })
}

/// A name asked about as a lock that is a semaphore: its state as one, with the number of
/// permits it stores, so that an operator who left out `--permits` reads what is held rather
/// than "free".
fn semaphore_instead(
    client: &Client,
    args: &StatusArgs,
    state: &LockState,
) -> Result<Option<(LockState, PrimitiveArgs)>, Failure> {
    if args.primitive.noun() != "lock" || state.problems.is_empty() {
        return Ok(None);
    }
    let Ok(as_semaphore) = client.semaphore(&args.name, 1)?.inspect() else {
        return Ok(None);
    };
    let Some(permits) = as_semaphore.permits.and_then(|n| u32::try_from(n).ok()) else {
        return Ok(None);
    };
    if !as_semaphore.problems.is_empty() {
        return Ok(None);
    }
    let primitive = PrimitiveArgs {
        permits: Some(permits),
        ..args.primitive.clone()
    };
    Ok(Some((as_semaphore, primitive)))
}

pub fn unlock(client: &Client, args: UnlockArgs) -> Result<ExitCode, Failure> {
    if !args.force {
        return Err(Failure::usage(format!(
            "unlock removes {:?} whoever holds it: add --force to mean it",
            args.name
        )));
    }
    let lock = args.primitive.lock(client, &args.name)?;
    let state = lock.inspect()?;
    let text = if lock.force_unlock()? {
        format!(
            "removed: {}",
            describe(&state, &args.primitive, args.primitive.noun())
        )
    } else {
        format!("{:?} was not held: nothing removed", args.name)
    };
    Ok(printed(out(&text)))
}

/// One sentence: `"jobs" held by 3f…:1 (1 hold), 12.3s left, token 42, last fencing token 42`,
/// then one line per problem found. A semaphore's says how many permits are held and free; a
/// read-write lock's names its side; an election's gives its leader's value.
fn describe(state: &LockState, primitive: &PrimitiveArgs, noun: &str) -> String {
    let token = match state.last_token {
        _ if state.tokens_exhausted() => {
            "but its fencing tokens are exhausted: no acquisition can succeed".to_owned()
        }
        Some(token) => format!("last fencing token {token}"),
        None => "no fencing token handed out yet".to_owned(),
    };
    let on = state
        .node
        .as_ref()
        .map_or_else(String::new, |node| format!(" (on {node})"));
    let mut text = if state.is_held() {
        let holders: Vec<String> = state
            .holders
            .iter()
            .map(|(owner, holds)| {
                let plural = if *holds == 1 { "" } else { "s" };
                // Owner ids come from the server: control characters are shown escaped, so that
                // one cannot write to the terminal.
                format!("{} ({holds} hold{plural})", owner.escape_debug())
            })
            .collect();
        let left = match (state.ttl, &state.holder_session) {
            (Some(ttl), _) => format!("{:.1}s left", ttl.as_secs_f64()),
            (None, Some(session)) => format!("while session {session} lives{}", since(state)),
            (None, None) => "no expiry".to_owned(),
        };
        let hold_token = state
            .hold_token
            .map_or_else(String::new, |token| format!(", token {token}"));
        let value = state
            .proclaimed
            .as_ref()
            .map_or_else(String::new, |value| format!(", value {value:?}"));
        format!(
            "{:?}{on}{} held by {}, {left}{hold_token}{value}, {token}",
            state.name,
            kind(noun),
            holders.join(", ")
        )
    } else {
        format!("{:?}{on}{} is free, {token}", state.name, kind(noun))
    };
    if let (Some(permits), Some(in_use)) = (primitive.permits, state.permits_in_use) {
        let free = u64::from(permits).saturating_sub(in_use);
        text.push_str(&format!(
            ", {in_use} of {permits} permits held, {free} free"
        ));
    }
    if let Some(waiting) = state.waiting {
        text.push_str(&format!(", {waiting} waiting"));
    }
    for problem in &state.problems {
        text.push_str("\nproblem: ");
        text.push_str(problem);
    }
    text
}

/// When the holder took the lock and how long ago, where the server says (ZooKeeper).
fn since(state: &LockState) -> String {
    let Some(since) = state.held_since else {
        return String::new();
    };
    let ago = std::time::SystemTime::now()
        .duration_since(since)
        .unwrap_or_default();
    format!(
        " (held since {}, {:.1}s ago)",
        humantime::format_rfc3339_millis(since),
        ago.as_secs_f64()
    )
}

/// The primitive, after a name: "" for a lock, " (semaphore)", ...
fn kind(noun: &str) -> String {
    match noun {
        "lock" => String::new(),
        noun => format!(" ({noun})"),
    }
}

fn json(state: &LockState, primitive: &PrimitiveArgs, noun: &str) -> serde_json::Value {
    let holders: Vec<serde_json::Value> = state
        .holders
        .iter()
        .map(|(owner, holds)| serde_json::json!({ "owner": owner, "holds": holds }))
        .collect();
    serde_json::json!({
        "name": state.name,
        "node": state.node,
        "held": state.is_held(),
        "holders": holders,
        "ttl_ms": state.ttl.map(|ttl| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
        "hold_token": state.hold_token,
        // At the largest token the counter gives no more; the text says they are exhausted.
        "last_token": if state.tokens_exhausted() { Some(i64::MAX as u64) } else { state.last_token },
        "tokens_exhausted": state.tokens_exhausted(),
        "problems": state.problems,
        "holder_session": state.holder_session,
        "held_since_ms": state.held_since.and_then(|since| {
            since
                .duration_since(std::time::SystemTime::UNIX_EPOCH)
                .ok()
                .map(|since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
        }),
        "waiting": state.waiting,
        "kind": noun,
        "value": state.proclaimed,
        "permits": primitive.permits,
        "permits_in_use": state.permits_in_use,
    })
}
