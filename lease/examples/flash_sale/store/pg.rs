//! The stock in PostgreSQL: the same tables and statements as in SQLite, with PostgreSQL's own
//! locks (`SELECT ... FOR UPDATE` for the pessimistic buyer). `left` is a keyword there, quoted.

use super::{Audit, Outcome, Result, ITEM};
use postgres::{Client, NoTls};

/// Connects to the database at `url`.
pub fn open(url: &str) -> Result<Client> {
    Client::connect(url, NoTls)
        .map_err(|e| format!("cannot connect to PostgreSQL at {url}: {e}").into())
}

/// Creates the tables afresh with `stock` items on sale.
pub fn create(client: &mut Client, stock: i64) -> Result<()> {
    client
        .batch_execute(
            "DROP TABLE IF EXISTS stock;
             DROP TABLE IF EXISTS orders;
             CREATE TABLE stock (
                 item    TEXT PRIMARY KEY,
                 \"left\"  BIGINT NOT NULL,
                 fence   BIGINT NOT NULL DEFAULT 0,
                 version BIGINT NOT NULL DEFAULT 0
             );
             CREATE TABLE orders (
                 id    BIGSERIAL PRIMARY KEY,
                 item  TEXT NOT NULL,
                 buyer TEXT NOT NULL,
                 token BIGINT
             );",
        )
        .map_err(|e| format!("cannot create the stock tables: {e}"))?;
    client.execute(
        "INSERT INTO stock (item, \"left\") VALUES ($1, $2)",
        &[&ITEM, &stock],
    )?;
    Ok(())
}

/// See [`Audit::read`].
pub fn audit(client: &mut Client, initial: i64) -> Result<Audit> {
    let row = client.query_one(
        "SELECT \"left\", fence FROM stock WHERE item = $1",
        &[&ITEM],
    )?;
    let orders: i64 = client
        .query_one("SELECT count(*) FROM orders WHERE item = $1", &[&ITEM])?
        .get(0);
    Ok(Audit {
        initial,
        left: row.get(0),
        orders,
        fence: row.get(1),
    })
}

/// See [`super::Conn::fence`].
pub fn fence(client: &mut Client) -> Result<i64> {
    Ok(client
        .query_one("SELECT fence FROM stock WHERE item = $1", &[&ITEM])?
        .get(0))
}

/// See [`super::Conn::claim_and_read`].
pub fn claim_and_read(client: &mut Client, token: i64, fenced: bool) -> Result<Option<i64>> {
    let mut tx = client.transaction()?;
    if fenced {
        let claimed = tx.execute(
            "UPDATE stock SET fence = $1 WHERE item = $2 AND fence <= $1",
            &[&token, &ITEM],
        )?;
        if claimed == 0 {
            tx.commit()?;
            return Ok(None);
        }
    }
    let left: i64 = tx
        .query_one("SELECT \"left\" FROM stock WHERE item = $1", &[&ITEM])?
        .get(0);
    tx.commit()?;
    Ok(Some(left))
}

/// See [`super::Conn::write_fenced`].
pub fn write_fenced(
    client: &mut Client,
    buyer: &str,
    token: i64,
    seen: i64,
    fenced: bool,
) -> Result<Outcome> {
    let mut tx = client.transaction()?;
    let updated = if fenced {
        tx.execute(
            "UPDATE stock SET \"left\" = $1::BIGINT - 1, fence = $2 \
             WHERE item = $3 AND \"left\" > 0 AND fence <= $2",
            &[&seen, &token, &ITEM],
        )?
    } else {
        tx.execute(
            "UPDATE stock SET \"left\" = $1::BIGINT - 1, fence = GREATEST(fence, $2) \
             WHERE item = $3 AND \"left\" > 0",
            &[&seen, &token, &ITEM],
        )?
    };
    let outcome = if updated == 1 {
        tx.execute(
            "INSERT INTO orders (item, buyer, token) VALUES ($1, $2, $3)",
            &[&ITEM, &buyer, &token],
        )?;
        Outcome::Bought
    } else {
        let newest: i64 = tx
            .query_one("SELECT fence FROM stock WHERE item = $1", &[&ITEM])?
            .get(0);
        if fenced && newest > token {
            Outcome::Fenced
        } else {
            Outcome::SoldOut
        }
    };
    tx.commit()?;
    Ok(outcome)
}

/// See [`super::Conn::buy_optimistic`].
pub fn buy_optimistic(client: &mut Client, buyer: &str) -> Result<(Outcome, u64)> {
    let mut retries = 0;
    loop {
        let row = client.query_one(
            "SELECT \"left\", version FROM stock WHERE item = $1",
            &[&ITEM],
        )?;
        let (left, version): (i64, i64) = (row.get(0), row.get(1));
        if left <= 0 {
            return Ok((Outcome::SoldOut, retries));
        }
        let mut tx = client.transaction()?;
        let updated = tx.execute(
            "UPDATE stock SET \"left\" = \"left\" - 1, version = version + 1 \
             WHERE item = $1 AND version = $2",
            &[&ITEM, &version],
        )?;
        if updated == 1 {
            tx.execute(
                "INSERT INTO orders (item, buyer) VALUES ($1, $2)",
                &[&ITEM, &buyer],
            )?;
            tx.commit()?;
            return Ok((Outcome::Bought, retries));
        }
        tx.rollback()?;
        retries += 1;
    }
}

/// See [`super::Conn::buy_pessimistic`]: here with the real `SELECT ... FOR UPDATE`, which locks
/// the item's row until the transaction ends.
pub fn buy_pessimistic(client: &mut Client, buyer: &str) -> Result<Outcome> {
    let mut tx = client.transaction()?;
    let left: i64 = tx
        .query_one(
            "SELECT \"left\" FROM stock WHERE item = $1 FOR UPDATE",
            &[&ITEM],
        )?
        .get(0);
    if left <= 0 {
        tx.commit()?;
        return Ok(Outcome::SoldOut);
    }
    tx.execute(
        "UPDATE stock SET \"left\" = \"left\" - 1 WHERE item = $1",
        &[&ITEM],
    )?;
    tx.execute(
        "INSERT INTO orders (item, buyer) VALUES ($1, $2)",
        &[&ITEM, &buyer],
    )?;
    tx.commit()?;
    Ok(Outcome::Bought)
}
