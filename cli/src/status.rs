//! `lease status`: an operator's view of a name, as the primitive it is. Works on a full
//! server and on keys that hold something no primitive can use.

use crate::apart::{self, Apart};
use crate::describe::{describe, json, on};
use crate::exit::{self, printed, Failure};
use crate::identity::{self, Found};
use crate::primitive::PrimitiveArgs;
use crate::say::out;
use clap::Args;
use redis_lease::{Client, LockState};
use std::process::ExitCode;

#[derive(Args)]
#[command(
    mut_arg("permits", |arg| arg.help(
        "NAME is a semaphore of N permits: show its holders, and how many permits are held and free"
    )),
    mut_arg("read", |arg| arg.help("NAME is a read-write lock: show its readers")),
    mut_arg("write", |arg| arg.help("NAME is a read-write lock: show its writer")),
    mut_arg("fair", |arg| arg.help(
        "NAME is a fair lock: show its holder, and how many wait in line"
    )),
)]
pub struct StatusArgs {
    /// The name to look at
    name: String,
    /// Print one JSON object instead of a sentence
    #[arg(long)]
    json: bool,
    /// NAME is a leader election (as `lease run --value` leads): show its leader's owner id,
    /// term and value (without flags, a free lock's name whose election has a leader is shown
    /// so)
    #[arg(long, conflicts_with_all = ["permits", "read", "write", "fair"])]
    election: bool,
    #[command(flatten)]
    primitive: PrimitiveArgs,
}

/// What `status` shows: a state read as a primitive, or a name that is another primitive's
/// than its flags say.
enum Shown {
    State {
        state: LockState,
        permits: Option<u32>,
        noun: &'static str,
    },
    /// What the name is instead, and the flag that shows it.
    Other { state: LockState, instead: String },
    /// A primitive kept apart from the lock (a latch, a rate limiter).
    Apart(Apart),
}

pub fn status(client: &Client, args: StatusArgs) -> Result<ExitCode, Failure> {
    let shown = look(client, &args)?;
    let (state, text) = match shown {
        Shown::State {
            state,
            permits,
            noun,
        } => {
            let text = if args.json {
                json(&state, permits, noun).to_string()
            } else {
                describe(&state, permits, noun)
            };
            (state, text)
        }
        Shown::Other { state, instead } => {
            let text = if args.json {
                let mut json = json(&state, args.primitive.permits, args.primitive.noun());
                json["instead"] = serde_json::Value::String(instead);
                json.to_string()
            } else {
                format!("{}{}", instead, on(&state))
            };
            let written = out(&text);
            return Ok(if written {
                ExitCode::from(exit::DATA)
            } else {
                printed(written)
            });
        }
        Shown::Apart(apart) => {
            let text = if args.json {
                apart.json().to_string()
            } else {
                apart.describe()
            };
            return Ok(if out(&text) {
                ExitCode::from(apart.code())
            } else {
                printed(false)
            });
        }
    };
    // Scripts ask `lease status NAME` as they ask `test`: 0 when held, 1 when free; a name that
    // is neither (keys no primitive can use, tokens exhausted) has a code of its own.
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

/// The name as the flags ask for it; without flags, as the primitive it is: a semaphore's
/// keys as a semaphore, a read-write lock's as the side held (the writer's, else the readers'),
/// a free lock whose election has a leader as the election, a free name whose semaphore
/// stores permits (on PostgreSQL, where the lock's view of it finds nothing wrong) as the
/// semaphore, and a free name that is a primitive kept apart from the lock (see `apart`) as
/// that.
fn look(client: &Client, args: &StatusArgs) -> Result<Shown, Failure> {
    if args.election {
        let state = client.election(&args.name)?.inspect()?;
        return Ok(shown(state, None, "election"));
    }
    let asked = &args.primitive;
    let state = asked.lock(client, &args.name)?.inspect()?;
    let plain = asked.noun() == "lock";
    if !state.problems.is_empty() {
        let found = identity::found(client, &args.name)?;
        if !found.takes(asked) {
            return Ok(match found {
                Found::Semaphore { permits, state } if plain => {
                    shown(state, Some(permits), "semaphore")
                }
                Found::ReadWrite { write, .. } if plain && write.is_held() => {
                    shown(*write, None, "write lock")
                }
                Found::ReadWrite { read, .. } if plain => shown(*read, None, "read lock"),
                found => Shown::Other {
                    instead: found.mismatch(&args.name, asked, "look at"),
                    state,
                },
            });
        }
    }
    if plain && !state.is_held() && state.problems.is_empty() {
        if let Ok(election) = client.election(&args.name) {
            let led = election.inspect()?;
            if led.is_held() {
                return Ok(shown(led, None, "election"));
            }
        }
        if let Some((permits, state)) = identity::stored_semaphore(client, &args.name)? {
            return Ok(shown(state, Some(permits), "semaphore"));
        }
        if let Some(apart) = apart::found(client, &args.name)? {
            return Ok(Shown::Apart(apart));
        }
    }
    Ok(shown(state, asked.permits, asked.noun()))
}

fn shown(state: LockState, permits: Option<u32>, noun: &'static str) -> Shown {
    Shown::State {
        state,
        permits,
        noun,
    }
}
