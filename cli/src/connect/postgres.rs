//! The PostgreSQL store on the command line: a `postgres://` (or `postgresql://`) URL chooses it
//! and its two options; Redis's options beside it, and its options on another store, are usage
//! errors that name the option as it was given (a flag, or the variable it came from).

use super::{global_source, Connection};
use crate::exit::Failure;
use clap::parser::ValueSource;
use clap::ArgMatches;
use redis_lease::ClientBuilder;

/// An option: its id in clap's matches, its flag and its variable.
type Named = (&'static str, &'static str, &'static str);

/// Redis's options, none of which a PostgreSQL database takes.
const REDIS_ONLY: [Named; 4] = [
    ("cluster", "--cluster", "LEASE_CLUSTER"),
    ("redlock", "--redlock", "LEASE_REDLOCK"),
    ("sentinel", "--sentinel", "LEASE_SENTINEL"),
    ("replica_acks", "--replica-acks", "LEASE_REPLICA_ACKS"),
];

/// PostgreSQL's options, which no other store takes.
const POSTGRES_ONLY: [Named; 2] = [
    ("pg_schema", "--pg-schema", "LEASE_PG_SCHEMA"),
    ("pg_listen_url", "--pg-listen-url", "LEASE_PG_LISTEN_URL"),
];

/// Whether `url` names a PostgreSQL database: its scheme is `postgres` or `postgresql` (in any
/// case), as the library reads it.
pub(super) fn is_postgres(url: &str) -> bool {
    url.split_once("://").is_some_and(|(scheme, _)| {
        scheme.eq_ignore_ascii_case("postgres") || scheme.eq_ignore_ascii_case("postgresql")
    })
}

/// `--cluster`, or `--cluster (from $LEASE_CLUSTER)`: an option as it was given.
fn given(matches: &ArgMatches, (id, flag, variable): Named) -> String {
    match global_source(matches, id) {
        Some(ValueSource::EnvVariable) => format!("{flag} (from ${variable})"),
        _ => flag.to_owned(),
    }
}

impl Connection {
    /// Refuses what a PostgreSQL URL cannot go with: other URLs, and Redis's options.
    pub(super) fn check_postgres(
        &self,
        matches: &ArgMatches,
        urls: &[String],
    ) -> Result<(), Failure> {
        if urls.len() != 1 {
            return Err(Failure::usage(
                "a postgres:// URL names one PostgreSQL database, which holds the locks by \
                 itself: give it alone, without other URLs",
            ));
        }
        let set = [
            self.cluster,
            self.redlock,
            self.sentinel.is_some(),
            self.replica_acks.is_some(),
        ];
        match REDIS_ONLY.into_iter().zip(set).find(|(_, set)| *set) {
            Some((option, _)) => Err(Failure::usage(format!(
                "{} is Redis's: a postgres:// URL names one PostgreSQL database, which takes no \
                 --cluster, --redlock, --sentinel or --replica-acks",
                given(matches, option)
            ))),
            None => Ok(()),
        }
    }

    /// Refuses PostgreSQL's options where the locks are on `store` (`Redis`, `ZooKeeper`).
    pub(super) fn refuse_postgres_options(
        &self,
        matches: &ArgMatches,
        store: &str,
    ) -> Result<(), Failure> {
        let set = [self.pg_schema.is_some(), self.pg_listen_url.is_some()];
        match POSTGRES_ONLY.into_iter().zip(set).find(|(_, set)| *set) {
            Some((option, _)) => Err(Failure::usage(format!(
                "{} is PostgreSQL's: it applies with a postgres:// URL only, and the locks here \
                 are on {store}",
                given(matches, option)
            ))),
            None => Ok(()),
        }
    }

    /// `builder`, a PostgreSQL client's, with the schema and the listening URL given.
    pub(super) fn postgres_configured(&self, mut builder: ClientBuilder) -> ClientBuilder {
        if let Some(schema) = &self.pg_schema {
            builder = builder.postgres_schema(schema.as_str());
        }
        if let Some(url) = &self.pg_listen_url {
            builder = builder.postgres_listen_url(url.as_str());
        }
        builder
    }
}

#[cfg(test)]
mod tests {
    use super::is_postgres;

    #[test]
    fn postgres_and_postgresql_urls_choose_postgres_and_no_other_does() {
        for url in [
            "postgres://app@db/orders",
            "postgresql://db/orders?sslmode=require",
            "POSTGRES://db/x",
        ] {
            assert!(is_postgres(url), "{url}");
        }
        for url in [
            "redis://db:6379",
            "rediss://db",
            "postgres:db",
            "pg://db/x",
            "postgres",
            "redis://postgres://x",
        ] {
            assert!(!is_postgres(url), "{url}");
        }
    }
}
