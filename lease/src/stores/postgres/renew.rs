//! Renewals: every lease the watchdog hands over in one statement (`renew` in `schema.sql`),
//! each extended from the database's clock if its hold still holds. A round also tries the
//! undoing of attempts whose answer was lost, kept for later (see `place.rs`).

use super::shared::Shared;
use crate::backend::{Renewal, Renewed, Renewer};
use crate::policy::after;
use std::sync::Arc;

pub(crate) struct PgRenewer {
    shared: Arc<Shared>,
}

impl PgRenewer {
    pub(crate) fn new(shared: Arc<Shared>) -> PgRenewer {
        PgRenewer { shared }
    }
}

/// `items` as a PostgreSQL array literal of text, each element quoted.
pub(crate) fn text_array<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = items
        .map(|item| format!("\"{}\"", item.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    format!("{{{}}}", quoted.join(","))
}

impl Renewer for PgRenewer {
    fn renew(&mut self, leases: &[Renewal<'_>]) -> Vec<Renewed> {
        let deadline = after(self.shared.call_timeout);
        let keys = text_array(leases.iter().map(|lease| lease.address));
        let holds = text_array(leases.iter().map(|lease| lease.hold));
        let millis: Vec<String> = leases
            .iter()
            .map(|lease| lease.lease.as_millis().to_string())
            .collect();
        let millis = format!("{{{}}}", millis.join(","));
        let renewed = self.shared.call("", deadline, |conn| {
            conn.query(
                &self.shared.sql.renew,
                &[Some(&keys), Some(&holds), Some(&millis)],
                deadline,
            )
        });
        let outcome = match renewed {
            Ok(rows) => {
                let mut outcome = vec![Renewed::Gone; leases.len()];
                for row in &rows {
                    let index = row
                        .get::<u64>(0)
                        .ok()
                        .and_then(|i| usize::try_from(i).ok())
                        .and_then(|i| i.checked_sub(1));
                    if let Some(renewed) = index.and_then(|i| outcome.get_mut(i)) {
                        *renewed = Renewed::Yes;
                    }
                }
                outcome
            }
            Err(error) => {
                log::warn!(
                    "renewing {} leases failed: {error}; each is tried again before its deadline",
                    leases.len()
                );
                vec![Renewed::Failed; leases.len()]
            }
        };
        self.shared.settle_undos(None, deadline);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_elements_are_quoted_whatever_they_hold() {
        assert_eq!(text_array(["a", "b,c"].into_iter()), r#"{"a","b,c"}"#);
        assert_eq!(
            text_array([r#"q"u\o"#, "{x}"].into_iter()),
            r#"{"q\"u\\o","{x}"}"#
        );
        assert_eq!(text_array(std::iter::empty()), "{}");
    }
}
