//! The `primitives` example, run as a user runs it, against a server of its own: it takes each
//! primitive and ends well.
//!
//! The example's code is compiled into this test (no harness): run with `PRIMITIVES_AS_EXAMPLE`
//! set, the binary is the example, so the test re-executes itself as it.
#![allow(clippy::print_stdout)]

mod common;

#[path = "../examples/primitives.rs"]
mod example;

use std::process::{Command, ExitCode};
use testkit::RedisServer;

/// Set in the environment of the process that acts as the example.
const AS_EXAMPLE: &str = "PRIMITIVES_AS_EXAMPLE";

fn main() -> ExitCode {
    if let Some(exit) = common::as_example(AS_EXAMPLE, example::main) {
        return exit;
    }
    print!("test the_example_takes_each_primitive ... ");
    let server = RedisServer::start();
    let output = Command::new(std::env::current_exe().expect("the test's own path"))
        .env(AS_EXAMPLE, "1")
        .arg(server.url())
        .output()
        .expect("the example runs");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{said}");
    for line in [
        "semaphore: 3 of 3 permits in use",
        "read-write lock: written with token Some(",
        "fair lock: my turn",
        "multilock: both accounts held",
        "cancelled wait: true",
    ] {
        assert!(said.contains(line), "{line:?} not in:\n{said}");
    }
    println!("ok");
    ExitCode::SUCCESS
}
