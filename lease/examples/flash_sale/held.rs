//! The sales whose lock lives in the stock's own PostgreSQL: each purchase is one write made
//! only while the buyer's hold holds the lock (`LeaseGuard::if_held`), the lock's check and the
//! stock's decrement in one transaction, so the stock needs no fence of its own. A holder frozen
//! past its lease is refused by the check when it wakes, and writes nothing.

use super::store::{Outcome, Result};
use redis_lease::LeaseGuard;

#[cfg(feature = "postgres")]
pub use on_postgres::buy;

/// Without the `postgres` feature: no held sale.
#[cfg(not(feature = "postgres"))]
pub fn buy(_guard: &LeaseGuard, _buyer: &str, _token: i64) -> Result<Outcome> {
    Err("the held sales need the crate's postgres feature".into())
}

#[cfg(feature = "postgres")]
mod on_postgres {
    use super::super::store::ITEM;
    use super::*;
    use redis_lease::{Error, Write, Written};

    /// Sells one item (and writes its order) if one is left, raising the stock's fence to the
    /// buyer's token so that the audit tells which holds wrote.
    const BUY: &str = "WITH sold AS (UPDATE stock SET \"left\" = \"left\" - 1, fence = \
                   greatest(fence, $3::bigint) WHERE item = $1 AND \"left\" > 0 RETURNING item) \
                   INSERT INTO orders (item, buyer, token) SELECT item, $2, $3::bigint FROM sold";

    /// One purchase made while `guard`'s hold holds: bought, sold out, or refused because the hold
    /// no longer held (nothing written).
    pub fn buy(guard: &LeaseGuard, buyer: &str, token: i64) -> Result<Outcome> {
        let write = Write::Sql {
            statement: BUY.into(),
            params: vec![
                Some(ITEM.into()),
                Some(buyer.into()),
                Some(token.to_string()),
            ],
        };
        match guard.if_held(&write) {
            Ok(Written::Sql {
                rows_affected: 1, ..
            }) => Ok(Outcome::Bought),
            Ok(_) => Ok(Outcome::SoldOut),
            Err(Error::NotOwner { .. }) => Ok(Outcome::Lost),
            Err(error) => Err(error.into()),
        }
    }
}
