//! The stock: where it lives (an SQLite file, or a PostgreSQL database), the three ways a buyer
//! takes one item from it, and the audit that counts what was oversold.
//!
//! `stock(item, left, fence, version)` holds one row per item; `orders(id, item, buyer, token)`
//! one row per item sold. Each database has its file here, behind [`Conn`].

mod pg;
mod sqlite;

use std::path::PathBuf;

/// The example's error type: a message that says which step failed.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The one item on sale.
pub const ITEM: &str = "sku-1";

/// How one purchase attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// One item bought: its order is written.
    Bought,
    /// Nothing left.
    SoldOut,
    /// The write carried a fencing token lower than one the stock has seen: refused.
    Fenced,
    /// (lock) The hold was found lost before the write: nothing written, the buyer tries again.
    Lost,
}

/// What the stock says after a sale.
#[derive(Debug, Clone, Copy)]
pub struct Audit {
    /// Items on sale at the start.
    pub initial: i64,
    /// Items the stock row says are left.
    pub left: i64,
    /// Orders written.
    pub orders: i64,
    /// The highest fencing token that wrote to the stock.
    pub fence: i64,
}

impl Audit {
    /// Items sold that did not exist: orders beyond the initial stock, plus stock below zero.
    pub fn oversold(&self) -> i64 {
        (self.orders - self.initial).max(0) + (-self.left).max(0)
    }
}

/// Where the stock lives.
#[derive(Debug, Clone)]
pub enum Database {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database, by URL (`postgres://...`); its tables are dropped and made afresh.
    Postgres(String),
}

impl Database {
    /// Reads what [`Database::arg`] wrote.
    pub fn parse(arg: &str) -> Result<Database> {
        if arg.starts_with("postgres://") || arg.starts_with("postgresql://") {
            Ok(Database::Postgres(arg.to_owned()))
        } else if let Some(path) = arg.strip_prefix("sqlite:") {
            Ok(Database::Sqlite(PathBuf::from(path)))
        } else {
            Err(format!("not a database: {arg:?} (sqlite:PATH or postgres://...)").into())
        }
    }

    /// The database as one command-line argument.
    pub fn arg(&self) -> String {
        match self {
            Database::Sqlite(path) => format!("sqlite:{}", path.display()),
            Database::Postgres(url) => url.clone(),
        }
    }

    /// Creates the tables afresh with `stock` items of [`ITEM`] on sale.
    pub fn create(&self, stock: i64) -> Result<()> {
        match self {
            Database::Sqlite(path) => sqlite::create(path, stock),
            Database::Postgres(url) => pg::create(&mut pg::open(url)?, stock),
        }
    }

    /// Opens one connection.
    pub fn open(&self) -> Result<Conn> {
        Ok(match self {
            Database::Sqlite(path) => Conn::Sqlite(sqlite::open(path)?),
            Database::Postgres(url) => Conn::Postgres(Box::new(pg::open(url)?)),
        })
    }
}

/// One connection to the stock.
pub enum Conn {
    Sqlite(rusqlite::Connection),
    Postgres(Box<postgres::Client>),
}

impl Conn {
    /// Reads the stock and counts the orders.
    pub fn audit(&mut self, initial: i64) -> Result<Audit> {
        match self {
            Conn::Sqlite(conn) => sqlite::audit(conn, initial),
            Conn::Postgres(client) => pg::audit(client, initial),
        }
    }

    /// The highest fencing token that has written to the stock.
    pub fn fence(&mut self) -> Result<i64> {
        match self {
            Conn::Sqlite(conn) => sqlite::fence(conn),
            Conn::Postgres(client) => pg::fence(client),
        }
    }

    /// Under the distributed lock, step 1: the holder raises the stock's fence to its token
    /// (refused if a newer holder already did) and reads what is left, in one transaction.
    /// Raising the fence before reading is what makes the read-then-write safe: a late write from
    /// an older holder is refused as soon as a newer holder has read, not only once it has
    /// written. `None` when the fence refused the token, else the items left.
    pub fn claim_and_read(&mut self, token: i64, fenced: bool) -> Result<Option<i64>> {
        match self {
            Conn::Sqlite(conn) => sqlite::claim_and_read(conn, token, fenced),
            Conn::Postgres(client) => pg::claim_and_read(client, token, fenced),
        }
    }

    /// Under the distributed lock, step 2: writes what the holder decided from what it read
    /// (`seen` items left, so `seen - 1` now) and the order, in one transaction, only if no newer
    /// token has written (`fence <= token`). With `fenced` false the token is not checked: what a
    /// store that trusts the lock alone would do.
    pub fn write_fenced(
        &mut self,
        buyer: &str,
        token: i64,
        seen: i64,
        fenced: bool,
    ) -> Result<Outcome> {
        match self {
            Conn::Sqlite(conn) => sqlite::write_fenced(conn, buyer, token, seen, fenced),
            Conn::Postgres(client) => pg::write_fenced(client, buyer, token, seen, fenced),
        }
    }

    /// Database only, optimistic: read `left` and `version`, then
    /// `UPDATE ... SET left = left - 1, version = version + 1 WHERE item = ? AND version = ?old`;
    /// another buyer's write in between leaves it without effect, and the buyer reads again.
    /// Returns the outcome and the number of such retries.
    pub fn buy_optimistic(&mut self, buyer: &str) -> Result<(Outcome, u64)> {
        match self {
            Conn::Sqlite(conn) => sqlite::buy_optimistic(conn, buyer),
            Conn::Postgres(client) => pg::buy_optimistic(client, buyer),
        }
    }

    /// Database only, pessimistic: the item locked before it is read (`SELECT ... FOR UPDATE`
    /// in PostgreSQL, `BEGIN IMMEDIATE` in SQLite), decremented, the order written, committed.
    pub fn buy_pessimistic(&mut self, buyer: &str) -> Result<Outcome> {
        match self {
            Conn::Sqlite(conn) => sqlite::buy_pessimistic(conn, buyer),
            Conn::Postgres(client) => pg::buy_pessimistic(client, buyer),
        }
    }
}
