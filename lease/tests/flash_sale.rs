//! The flash sale example, run small: every sale (the lock, the two database-only ones, and the
//! holder frozen past its lease) sells the whole stock and nothing more, and the frozen holder's
//! late write is refused by the fencing check; with the `postgres` feature, the sales whose lock
//! lives in the stock's own PostgreSQL too, whose frozen holder's late write is refused by the
//! check of its hold made with the write.
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
        print!("test writes_while_held_sell_the_stock_and_refuse_the_frozen_holder ... ");
        writes_while_held_sell_the_stock_and_refuse_the_frozen_holder();
        println!("ok");
    }
    ExitCode::SUCCESS
}

/// The example's output, run small with `args`, once it ended well with `oversold: 0`; each of
/// `sales` sold the whole stock (20).
fn run_small(args: &[&str], sales: &[&str]) -> String {
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

fn flash_sale_sells_the_stock_and_no_more_and_fences_the_frozen_holder() {
    let stdout = run_small(
        &[],
        &[
            "redis-lease lock",
            "optimistic",
            "pessimistic",
            "frozen holder",
        ],
    );
    assert!(
        stdout
            .lines()
            .any(|line| line.contains("late token=") && line.contains("outcome=Fenced")),
        "the frozen holder's late write was not refused by fencing:\n{stdout}"
    );
}

fn writes_while_held_sell_the_stock_and_refuse_the_frozen_holder() {
    let stdout = run_small(
        &["--db", "postgres", "--only", "held,held-frozen"],
        &["write while held", "held, frozen"],
    );
    assert!(
        stdout
            .lines()
            .any(|line| line.contains("late token=") && line.contains("outcome=Lost")),
        "the frozen holder's late write was not refused by the check of its hold:\n{stdout}"
    );
}
