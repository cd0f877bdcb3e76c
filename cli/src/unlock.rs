//! `lease unlock --force`: an operator's last resort, which says exactly what it removed, and
//! removes nothing of a name that is another primitive's than its flags say.

use crate::describe::{holders, left, on};
use crate::exit::{self, printed, Failure};
use crate::identity::{self, leader_text};
use crate::primitive::PrimitiveArgs;
use crate::say::out;
use clap::Args;
use redis_lease::{Client, LockState};
use std::process::ExitCode;

#[derive(Args)]
#[command(
    mut_arg("permits", |arg| arg.help(
        "NAME is a semaphore of N permits: remove it, with every holder"
    )),
    mut_arg("read", |arg| arg.help(
        "NAME is a read-write lock: remove it, with its readers and its writer"
    )),
    mut_arg("write", |arg| arg.help(
        "NAME is a read-write lock: remove it, with its readers and its writer"
    )),
    mut_arg("fair", |arg| arg.help(
        "NAME is a fair lock: remove its holder (its line of waiters stays)"
    )),
)]
pub struct UnlockArgs {
    /// The name to clear
    name: String,
    #[command(flatten)]
    primitive: PrimitiveArgs,
    /// Required: NAME is removed whoever holds it, and its holders are not told
    #[arg(long)]
    force: bool,
}

pub fn unlock(client: &Client, args: UnlockArgs) -> Result<ExitCode, Failure> {
    if !args.force {
        return Err(Failure::usage(format!(
            "unlock removes {:?} whoever holds it: add --force to mean it",
            args.name
        )));
    }
    let asked = &args.primitive;
    let lock = asked.lock(client, &args.name)?;
    let state = lock.inspect()?;
    if !state.problems.is_empty() {
        let found = identity::found(client, &args.name)?;
        if !found.takes(asked) {
            return Err(Failure::new(
                exit::DATA,
                format!(
                    "nothing removed: {}",
                    found.mismatch(&args.name, asked, "remove")
                ),
            ));
        }
    }
    // A read-write lock goes whole: both sides' holders are named.
    let sides = if asked.read || asked.write {
        let rw = client.read_write_lock(&args.name)?;
        Some((rw.read_lock().inspect()?, rw.write_lock().inspect()?))
    } else {
        None
    };
    let held = state.is_held()
        || sides
            .as_ref()
            .is_some_and(|(read, write)| read.is_held() || write.is_held());
    if !held && state.problems.is_empty() {
        if let Some(leader) = identity::leader(client, &args.name)? {
            return Err(Failure::new(
                exit::DATA,
                format!(
                    "nothing removed: {:?} is an election ({} leads), not a {}; unlock \
                     removes no leader",
                    args.name,
                    leader_text(&leader),
                    asked.noun()
                ),
            ));
        }
    }
    let text = if !lock.force_unlock()? {
        format!("{:?} was not held: nothing removed", args.name)
    } else if !held {
        format!(
            "removed the keys of {:?}{}: nobody held it",
            args.name,
            on(&state)
        )
    } else {
        removed(asked, &state, sides.as_ref())
    };
    Ok(printed(out(&text)))
}

/// What was removed, and who held it: `removed the semaphore "jobs" (on …) and its holders:
/// web-1 (1 hold), web-2 (1 hold)`; `sides`, a read-write lock's readers and writer.
fn removed(
    asked: &PrimitiveArgs,
    state: &LockState,
    sides: Option<&(LockState, LockState)>,
) -> String {
    let name = &state.name;
    let on = on(state);
    if asked.permits.is_some() {
        return format!(
            "removed the semaphore {name:?}{on} and its holders: {}",
            holders(state)
        );
    }
    if let Some((read, write)) = sides {
        let mut who = Vec::new();
        if write.is_held() {
            who.push(format!("its writer {}", holders(write)));
        }
        if read.is_held() {
            who.push(format!("its readers {}", holders(read)));
        }
        return format!(
            "removed the read-write lock {name:?}{on} and {}",
            who.join(" and ")
        );
    }
    let token = state
        .hold_token
        .map_or_else(String::new, |token| format!(", token {token}"));
    format!(
        "removed the lock {name:?}{on}: it was held by {}, {}{token}",
        holders(state),
        left(state)
    )
}
