//! A primitive's state in words and in JSON, as `lease status` prints it, and the pieces of it
//! that other messages name (its holders, its lease left): one wording for every command, so
//! that no message shows more of a holder than `status` does.

use crate::human;
use redis_lease::LockState;

/// One sentence: `"jobs" held by 3f…:1 (1 hold), 12.3s left, token 42, last fencing token 42`,
/// then one line per problem found. A semaphore's (`permits` given) says how many permits are
/// held and free; a read-write lock's names its side; an election's gives its leader's value.
pub fn describe(state: &LockState, permits: Option<u32>, noun: &str) -> String {
    let token = match state.last_token {
        _ if state.tokens_exhausted() => {
            "but its fencing tokens are exhausted: no acquisition can succeed".to_owned()
        }
        Some(token) => format!("last fencing token {token}"),
        None => "no fencing token handed out yet".to_owned(),
    };
    let mut text = if state.is_held() {
        let hold_token = state
            .hold_token
            .map_or_else(String::new, |token| format!(", token {token}"));
        let value = state
            .proclaimed
            .as_ref()
            .map_or_else(String::new, |value| format!(", value {value:?}"));
        format!(
            "{:?}{}{} held by {}, {}{hold_token}{value}, {token}",
            state.name,
            on(state),
            kind(noun),
            holders(state),
            left(state)
        )
    } else {
        format!(
            "{:?}{}{} is free, {token}",
            state.name,
            on(state),
            kind(noun)
        )
    };
    if let (Some(permits), Some(in_use)) = (permits, state.permits_in_use) {
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

/// The holders, with their hold counts: `3f…:1 (1 hold), web-2 (2 holds)`. Owner ids come from
/// the server: control characters are shown escaped, so that one cannot write to the terminal.
pub fn holders(state: &LockState) -> String {
    let holders: Vec<String> = state
        .holders
        .iter()
        .map(|(owner, holds)| {
            let plural = if *holds == 1 { "" } else { "s" };
            format!("{} ({holds} hold{plural})", owner.escape_debug())
        })
        .collect();
    holders.join(", ")
}

/// How long the hold lasts: `12.3s left`, `while session 0x… lives`, `no expiry`.
pub fn left(state: &LockState) -> String {
    match (state.ttl, &state.holder_session) {
        (Some(ttl), _) => format!("{} left", human::duration(ttl)),
        (None, Some(session)) => format!("while session {session} lives{}", since(state)),
        (None, None) => "no expiry".to_owned(),
    }
}

/// ` (on redis://cache:6379)`: the server that answered, where the state names it.
pub fn on(state: &LockState) -> String {
    state
        .node
        .as_ref()
        .map_or_else(String::new, |node| format!(" (on {node})"))
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
        " (held since {}, {} ago)",
        humantime::format_rfc3339_millis(since),
        human::duration(ago)
    )
}

/// The primitive, after a name: "" for a lock, " (semaphore)", ...
fn kind(noun: &str) -> String {
    match noun {
        "lock" => String::new(),
        noun => format!(" ({noun})"),
    }
}

/// The state as one JSON object, `kind` the noun it is read as.
pub fn json(state: &LockState, permits: Option<u32>, noun: &str) -> serde_json::Value {
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
        "permits": permits,
        "permits_in_use": state.permits_in_use,
    })
}
