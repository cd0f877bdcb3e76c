//! The flash sale example, run small: every sale (the lock, the two database-only ones, and the
//! holder frozen past its lease) sells the whole stock and nothing more, and the frozen holder's
//! late write is refused by the fencing check: with the stock in SQLite and the lock on Redis,
//! and (built with the `postgres` feature) with the stock and the lock in one PostgreSQL, where
//! the sales whose purchases are writes made while the hold holds (`if_held`) run too, and their
//! frozen holder's late write is refused by the check of its hold.
//!
//! The example's code is compiled into this test (no harness): run with `FLASH_SALE_AS_EXAMPLE`
//! set, the binary is the example, so the test re-executes itself as the example's coordinator,
//! whose workers are re-executions of it too.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "../examples/flash_sale/main.rs"]
mod example;

use std::process::{Command, ExitCode};

/// Set in the environment of the processes that act as the example.
const AS_EXAMPLE: &str = "FLASH_SALE_AS_EXAMPLE";

fn main() -> ExitCode {
    if std::env::var_os(AS_EXAMPLE).is_some() {
        return example::main();
    }
    print!("test flash_sale_sells_the_stock_and_no_more_and_fences_the_frozen_holder ... ");
    flash_sale_sells_the_stock_and_no_more_and_fences_the_frozen_holder();
    println!("ok");
    if cfg!(feature = "postgres") {
        print!("test flash_sale_with_the_stock_and_the_lock_in_one_postgresql ... ");
        flash_sale_with_the_stock_and_the_lock_in_one_postgresql();
        println!("ok");
    }
    ExitCode::SUCCESS
}

/// The sales that take the lock and write fenced, and the database's own.
const FENCED_SALES: [&str; 4] = [
    "redis-lease lock",
    "optimistic",
    "pessimistic",
    "frozen holder",
];

/// The example's output, run small with `args`, once it ended well with `oversold: 0`, its first
/// line (which says where the stock and the lock are) has `placed` in it, and each of `sales`
/// sold the whole stock (20).
fn run_small(args: &[&str], placed: &str, sales: &[&str]) -> String {
    let this = std::env::current_exe().expect("the test's own path");
    let output = Command::new(this)
        .env(AS_EXAMPLE, "1")
        .env_remove("REDIS_URL")
        .args(["--stock", "20", "--procs", "2", "--threads", "3"])
        .args(["--lease-ms", "300"])
        .args(args)
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit status {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert!(
        stdout
            .lines()
            .next()
            .is_some_and(|line| line.contains(placed)),
        "no {placed:?} in its first line:\n{stdout}"
    );
    assert_eq!(
        stdout.lines().last(),
        Some("oversold: 0"),
        "stdout:\n{stdout}"
    );
    for sale in sales {
        let row = stdout
            .lines()
            .rev()
            .find(|line| line.starts_with(sale))
            .unwrap_or_else(|| panic!("no summary row for {sale}:\n{stdout}"));
        let sold: Vec<&str> = row[sale.len()..].split_whitespace().collect();
        assert_eq!(sold.first(), Some(&"20"), "{sale} sold: {row}");
    }
    stdout
}

/// Whether the frozen holder's late write was refused by fencing.
fn assert_fenced(stdout: &str) {
    assert!(
        stdout
            .lines()
            .any(|line| line.contains("late token=") && line.contains("outcome=Fenced")),
        "the frozen holder's late write was not refused by fencing:\n{stdout}"
    );
}

fn flash_sale_sells_the_stock_and_no_more_and_fences_the_frozen_holder() {
    let stdout = run_small(
        &[],
        "stock in SQLite (WAL), lease 300 ms, lock on Redis at redis://",
        &FENCED_SALES,
    );
    assert_fenced(&stdout);
}

/// The four sales with the stock and the lock in one PostgreSQL, and the two whose purchases are
/// writes made while the hold holds.
fn flash_sale_with_the_stock_and_the_lock_in_one_postgresql() {
    let stdout = run_small(
        &["--db", "postgres", "--lock", "postgres"],
        "lease 300 ms, lock in the stock's PostgreSQL,",
        &[&FENCED_SALES[..], &["write while held", "held, frozen"]].concat(),
    );
    assert_fenced(&stdout);
    assert!(
        stdout
            .lines()
            .any(|line| line.contains("late token=") && line.contains("outcome=Lost")),
        "the frozen holder's late write was not refused by the check of its hold:\n{stdout}"
    );
}
