//! `lease resize`: a semaphore's number of permits, changed whoever holds permits now.

use crate::exit::{printed, Failure};
use crate::say::out;
use clap::Args;
use redis_lease::Client;
use std::process::ExitCode;

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
