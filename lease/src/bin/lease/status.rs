//! `lease status` and `lease unlock --force`.

use crate::exit::Failure;
use clap::Args;
use lease::{Client, LockState};
use std::process::ExitCode;

#[derive(Args)]
pub struct StatusArgs {
    /// The lock's name
    name: String,
    /// Print one JSON object instead of a sentence
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct UnlockArgs {
    /// The lock's name
    name: String,
    /// Required: the lock is removed whoever holds it, and the holder is not told
    #[arg(long)]
    force: bool,
}

pub fn status(client: &Client, args: StatusArgs) -> Result<ExitCode, Failure> {
    let state = client.lock(&args.name)?.inspect()?;
    if args.json {
        println!("{}", json(&state));
    } else {
        println!("{}", describe(&state));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn unlock(client: &Client, args: UnlockArgs) -> Result<ExitCode, Failure> {
    if !args.force {
        return Err(Failure::usage(format!(
            "unlock removes {:?} whoever holds it: add --force to mean it",
            args.name
        )));
    }
    let lock = client.lock(&args.name)?;
    let state = lock.inspect()?;
    if lock.force_unlock()? {
        println!("removed: {}", describe(&state));
    } else {
        println!("{:?} was not held: nothing removed", args.name);
    }
    Ok(ExitCode::SUCCESS)
}

/// One sentence: `"jobs" held by 3f…:1 (1 hold), 12.3s left, last fencing token 42`.
fn describe(state: &LockState) -> String {
    let token = match state.last_token {
        Some(token) => format!("last fencing token {token}"),
        None => "no fencing token handed out yet".to_owned(),
    };
    if !state.is_held() {
        return format!("{:?} is free, {token}", state.name);
    }
    let holders: Vec<String> = state
        .holders
        .iter()
        .map(|(owner, holds)| {
            let plural = if *holds == 1 { "" } else { "s" };
            format!("{owner} ({holds} hold{plural})")
        })
        .collect();
    let left = match state.ttl {
        Some(ttl) => format!("{:.1}s left", ttl.as_secs_f64()),
        None => "no expiry".to_owned(),
    };
    format!(
        "{:?} held by {}, {left}, {token}",
        state.name,
        holders.join(", ")
    )
}

fn json(state: &LockState) -> serde_json::Value {
    let holders: Vec<serde_json::Value> = state
        .holders
        .iter()
        .map(|(owner, holds)| serde_json::json!({ "owner": owner, "holds": holds }))
        .collect();
    serde_json::json!({
        "name": state.name,
        "held": state.is_held(),
        "holders": holders,
        "ttl_ms": state.ttl.map(|ttl| ttl.as_millis() as u64),
        "last_token": state.last_token,
    })
}
