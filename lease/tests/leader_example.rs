//! The `leader` example, as a user runs it: two copies on one server take turns to lead, each
//! with a term of its own, and the store's fence ends at the higher one.
//!
//! The example's code is compiled into this test (no harness): run with `LEADER_AS_EXAMPLE` set,
//! the binary is the example, so the test re-executes itself as two copies of it.
#![allow(clippy::print_stdout)]

mod common;

#[path = "../examples/leader.rs"]
mod example;

use redis::Commands;
use std::process::{Command, ExitCode, Stdio};
use testkit::RedisServer;

/// Set in the environment of the processes that act as the example.
const AS_EXAMPLE: &str = "LEADER_AS_EXAMPLE";

fn main() -> ExitCode {
    if let Some(exit) = common::as_example(AS_EXAMPLE, example::main) {
        return exit;
    }
    print!("test two_copies_of_the_example_take_turns_to_lead ... ");
    two_copies_of_the_example_take_turns_to_lead();
    println!("ok");
    ExitCode::SUCCESS
}

fn two_copies_of_the_example_take_turns_to_lead() {
    let this = std::env::current_exe().expect("the test's own path");
    let server = RedisServer::start();
    let copies: Vec<_> = ["host-a", "host-b"]
        .iter()
        .map(|me| {
            Command::new(&this)
                .env(AS_EXAMPLE, "1")
                .args([server.url().as_str(), me])
                .stdout(Stdio::piped())
                .spawn()
                .expect("start the example")
        })
        .collect();
    let mut terms = Vec::new();
    for copy in copies {
        let done = copy.wait_with_output().expect("ran");
        let said = String::from_utf8_lossy(&done.stdout).into_owned();
        assert!(done.status.success(), "{said}");
        assert!(said.contains("stepped down"), "{said}");
        let term: u64 = said
            .split("leading with term ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|term| term.parse().ok())
            .unwrap_or_else(|| panic!("a term in {said}"));
        terms.push(term);
    }
    assert_ne!(terms[0], terms[1], "two leaders of one term");
    let top: u64 = server
        .connection()
        .hget("scheduler:state", "term")
        .expect("HGET");
    assert_eq!(top, terms.iter().copied().max().expect("two"));
}
