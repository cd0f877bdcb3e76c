//! `lease leader`: who leads an election, once or as it changes.

use crate::exit::{self, printed, Failure};
use crate::say::out;
use clap::Args;
use redis_lease::{Client, Leader};
use std::process::ExitCode;

#[derive(Args)]
pub struct LeaderArgs {
    /// The election's name
    name: String,
    /// Print the leader, then a line at each change (a new term, a new value, no leader), until
    /// interrupted
    #[arg(long)]
    follow: bool,
    /// Print one JSON object per line instead of a sentence
    #[arg(long)]
    json: bool,
}

pub fn leader(client: &Client, args: LeaderArgs) -> Result<ExitCode, Failure> {
    let election = client.election(&args.name)?;
    if !args.follow {
        let leader = election.leader()?;
        let written = out(&line(&args, leader.as_ref()));
        // As `lease status`: 0 when someone leads, 1 when no one does.
        return Ok(if written && leader.is_none() {
            ExitCode::from(exit::FREE)
        } else {
            printed(written)
        });
    }
    let observer = election.observe()?;
    for leader in observer.changes() {
        if !out(&line(&args, leader.as_ref())) {
            return Ok(printed(false));
        }
    }
    Err(Failure::new(exit::FAILED, "the observer stopped"))
}

/// One line: `"scheduler": term 42, "host-a:8080"`, or `"scheduler": no leader`; or its JSON.
fn line(args: &LeaderArgs, leader: Option<&Leader>) -> String {
    if args.json {
        return serde_json::json!({
            "name": args.name,
            "leader": leader.is_some(),
            "term": leader.map(|leader| leader.term),
            "value": leader.map(|leader| &leader.value),
        })
        .to_string();
    }
    match leader {
        // The value comes from the store: escaped, so that it cannot write to the terminal.
        Some(leader) => format!("{:?}: term {}, {:?}", args.name, leader.term, leader.value),
        None => format!("{:?}: no leader", args.name),
    }
}
