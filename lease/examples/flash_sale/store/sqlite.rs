//! The stock in an SQLite file. Every write runs in a `BEGIN IMMEDIATE` transaction, which takes
//! SQLite's write lock (one per database) at its start, and waits for it up to the busy timeout.

use super::{Audit, Outcome, Result, ITEM};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::path::Path;
use std::time::Duration;

/// Opens the database at `path` as every connection of the example does: WAL journal,
/// `synchronous = NORMAL` (a commit is not synced to disk; a checkpoint is), a 30 s busy timeout.
pub fn open(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)
        .map_err(|e| format!("cannot open the stock database {}: {e}", path.display()))?;
    conn.busy_timeout(Duration::from_secs(30))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

/// Creates the tables afresh with `stock` items of [`ITEM`] on sale.
pub fn create(path: &Path, stock: i64) -> Result<()> {
    let conn = open(path)?;
    conn.execute_batch(
        "DROP TABLE IF EXISTS stock;
         DROP TABLE IF EXISTS orders;
         CREATE TABLE stock (
             item    TEXT PRIMARY KEY,
             left    INTEGER NOT NULL,
             fence   INTEGER NOT NULL DEFAULT 0,
             version INTEGER NOT NULL DEFAULT 0
         );
         CREATE TABLE orders (
             id    INTEGER PRIMARY KEY,
             item  TEXT NOT NULL,
             buyer TEXT NOT NULL,
             token INTEGER
         );",
    )
    .map_err(|e| format!("cannot create the stock tables: {e}"))?;
    conn.execute(
        "INSERT INTO stock (item, left) VALUES (?1, ?2)",
        params![ITEM, stock],
    )?;
    Ok(())
}

/// See [`super::Conn::audit`].
pub fn audit(conn: &Connection, initial: i64) -> Result<Audit> {
    let (left, fence): (i64, i64) = conn.query_row(
        "SELECT left, fence FROM stock WHERE item = ?1",
        [ITEM],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    let orders: i64 = conn.query_row(
        "SELECT count(*) FROM orders WHERE item = ?1",
        [ITEM],
        |row| row.get(0),
    )?;
    Ok(Audit {
        initial,
        left,
        orders,
        fence,
    })
}

/// The highest fencing token that has written to the stock.
pub fn fence(conn: &Connection) -> Result<i64> {
    let fence = conn.query_row("SELECT fence FROM stock WHERE item = ?1", [ITEM], |row| {
        row.get(0)
    })?;
    Ok(fence)
}

/// Under the distributed lock, step 1: the holder raises the stock's fence to its token (refused
/// if a newer holder already did) and reads what is left. Raising the fence before reading is what
/// makes the read-then-write below safe: a late write from an older holder is refused as soon as
/// a newer holder has read, not only once it has written.
///
/// Returns `None` when the fence refused the token, else the items left.
pub fn claim_and_read(conn: &mut Connection, token: i64, fenced: bool) -> Result<Option<i64>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    if fenced {
        let claimed = tx.execute(
            "UPDATE stock SET fence = ?1 WHERE item = ?2 AND fence <= ?1",
            params![token, ITEM],
        )?;
        if claimed == 0 {
            tx.commit()?;
            return Ok(None);
        }
    }
    let left: i64 = tx.query_row("SELECT left FROM stock WHERE item = ?1", [ITEM], |row| {
        row.get(0)
    })?;
    tx.commit()?;
    Ok(Some(left))
}

/// Under the distributed lock, step 2: writes what the holder decided from what it read (`seen`
/// items left, so `seen - 1` now) and the order, in one transaction, only if no newer token has
/// written (`fence <= token`). With `fenced` false the token is not checked: what a store that
/// trusts the lock alone would do.
pub fn write_fenced(
    conn: &mut Connection,
    buyer: &str,
    token: i64,
    seen: i64,
    fenced: bool,
) -> Result<Outcome> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let updated = if fenced {
        tx.execute(
            "UPDATE stock SET left = ?1 - 1, fence = ?2 \
             WHERE item = ?3 AND left > 0 AND fence <= ?2",
            params![seen, token, ITEM],
        )?
    } else {
        tx.execute(
            "UPDATE stock SET left = ?1 - 1, fence = max(fence, ?2) WHERE item = ?3 AND left > 0",
            params![seen, token, ITEM],
        )?
    };
    let outcome = if updated == 1 {
        tx.execute(
            "INSERT INTO orders (item, buyer, token) VALUES (?1, ?2, ?3)",
            params![ITEM, buyer, token],
        )?;
        Outcome::Bought
    } else {
        let newest = fence(&tx)?;
        if fenced && newest > token {
            Outcome::Fenced
        } else {
            Outcome::SoldOut
        }
    };
    tx.commit()?;
    Ok(outcome)
}

/// Database only, optimistic: read `left` and `version`, then
/// `UPDATE ... SET left = left - 1, version = version + 1 WHERE item = ? AND version = ?old`;
/// another buyer's write in between leaves it without effect, and the buyer reads again.
/// Returns the outcome and the number of such retries.
pub fn buy_optimistic(conn: &mut Connection, buyer: &str) -> Result<(Outcome, u64)> {
    let mut retries = 0;
    loop {
        let (left, version): (i64, i64) = conn.query_row(
            "SELECT left, version FROM stock WHERE item = ?1",
            [ITEM],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        if left <= 0 {
            return Ok((Outcome::SoldOut, retries));
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let updated = tx.execute(
            "UPDATE stock SET left = left - 1, version = version + 1 \
             WHERE item = ?1 AND version = ?2",
            params![ITEM, version],
        )?;
        if updated == 1 {
            tx.execute(
                "INSERT INTO orders (item, buyer) VALUES (?1, ?2)",
                params![ITEM, buyer],
            )?;
            tx.commit()?;
            return Ok((Outcome::Bought, retries));
        }
        tx.rollback()?;
        retries += 1;
    }
}

/// Database only, pessimistic: `BEGIN IMMEDIATE` takes SQLite's write lock before the read, as
/// `SELECT ... FOR UPDATE` takes the row's in MySQL or PostgreSQL (SQLite's lock covers the
/// whole database), so the read and the write see no other writer in between.
pub fn buy_pessimistic(conn: &mut Connection, buyer: &str) -> Result<Outcome> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let left: Option<i64> = tx
        .query_row("SELECT left FROM stock WHERE item = ?1", [ITEM], |row| {
            row.get(0)
        })
        .optional()?;
    let left = left.ok_or("the stock row is missing")?;
    if left <= 0 {
        tx.commit()?;
        return Ok(Outcome::SoldOut);
    }
    tx.execute(
        "UPDATE stock SET left = left - 1 WHERE item = ?1",
        params![ITEM],
    )?;
    tx.execute(
        "INSERT INTO orders (item, buyer) VALUES (?1, ?2)",
        params![ITEM, buyer],
    )?;
    tx.commit()?;
    Ok(Outcome::Bought)
}
