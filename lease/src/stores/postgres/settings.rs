//! [`PostgresSettings`]: what a PostgreSQL client is built from (the URL, the schema its tables
//! live in, the server a listening connection reaches), and the connection configuration made of
//! them with the builder's common settings (password, TLS files).

use crate::backend::Settings;
use crate::error::{Error, Result};
use crate::redact::redact;
use deadline_net::tls::TlsFiles;
use postgres_blocking::{Config, SslMode};

/// The schema the store's tables and functions live in when the builder names none.
pub(crate) const DEFAULT_SCHEMA: &str = "lease";

/// The longest schema name: PostgreSQL's identifiers are at most 63 bytes, and the notification
/// channel (`lease:<schema>`) is one.
const MAX_SCHEMA: usize = 57;

/// The builder's PostgreSQL settings, as given.
#[derive(Clone)]
pub(crate) struct PostgresSettings {
    /// The server (or pooler) every call goes to.
    pub(crate) url: String,
    /// The schema of the store's tables, if the builder named one.
    pub(crate) schema: Option<String>,
    /// The server the listening connection goes to, when `url` is a pooler that cannot carry
    /// `LISTEN` (PgBouncer in transaction mode): the database's own address.
    pub(crate) listen_url: Option<String>,
}

impl std::fmt::Debug for PostgresSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSettings")
            .field("url", &redact(&self.url))
            .field("schema", &self.schema)
            .field("listen_url", &self.listen_url.as_deref().map(redact))
            .finish()
    }
}

/// What a PostgreSQL client connects with, checked.
pub(crate) struct Connecting {
    /// Every call's connections.
    pub(crate) calls: Config,
    /// The listening connection's.
    pub(crate) listen: Config,
    /// The schema, as given (a plain identifier).
    pub(crate) schema: String,
    /// The URL, password hidden.
    pub(crate) shown: String,
}

/// Checks a schema name: a plain lower-case identifier, which needs no quoting anywhere.
pub(super) fn check_schema(schema: &str) -> Result<()> {
    let plain = schema
        .bytes()
        .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_')
        && schema
            .bytes()
            .next()
            .is_some_and(|first| first.is_ascii_lowercase() || first == b'_');
    if !plain || schema.len() > MAX_SCHEMA {
        return Err(Error::InvalidArgument(format!(
            "PostgreSQL schema {schema:?}: a name of 1 to {MAX_SCHEMA} lower-case letters, digits \
             and '_', not starting with a digit, is expected"
        )));
    }
    Ok(())
}

/// The configuration `url` gives, with the builder's password and TLS files applied (TLS files
/// ask for a verified TLS session; a URL that turns TLS off is refused with them).
fn config(url: &str, password: Option<&str>, tls: &TlsFiles, application: &str) -> Result<Config> {
    let shown = redact(url);
    let mut config = Config::from_url(url)
        .map_err(|error| Error::InvalidArgument(format!("postgres url {shown:?}: {error}")))?;
    if let Some(password) = password {
        config = config.password(password);
    }
    if tls.ca_file.is_some() || tls.client_cert.is_some() {
        match config.get_ssl_mode() {
            SslMode::Disable => {
                return Err(Error::InvalidArgument(format!(
                    "the TLS settings cannot be honoured: postgres url {shown:?} asks for \
                     sslmode=disable"
                )))
            }
            SslMode::Prefer => config = config.ssl_mode(SslMode::Require),
            _ => {}
        }
        config = config.tls_files(tls.clone());
    }
    if config.get_application_name().is_none() {
        config = config.application_name(application);
    }
    Ok(config)
}

impl PostgresSettings {
    /// The connections' configurations, checked.
    pub(crate) fn connecting(&self, common: &Settings) -> Result<Connecting> {
        let (password, tls) = (common.password.as_deref(), &common.tls);
        let schema = self.schema.as_deref().unwrap_or(DEFAULT_SCHEMA);
        check_schema(schema)?;
        let application = common.thread_name("pg");
        let calls = config(&self.url, password, tls, &application)?;
        let listen = match &self.listen_url {
            Some(url) => config(url, password, tls, &application)?,
            None => calls.clone(),
        };
        Ok(Connecting {
            calls,
            listen,
            schema: schema.to_owned(),
            shown: redact(&self.url),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_plain_identifiers() {
        for good in ["lease", "_locks", "app_2"] {
            assert!(check_schema(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Lease",
            "2app",
            "a-b",
            "a;drop",
            &"x".repeat(MAX_SCHEMA + 1),
        ] {
            assert!(
                matches!(check_schema(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn tls_files_with_a_url_that_turns_tls_off_are_refused() {
        let files = TlsFiles {
            ca_file: Some(deadline_net::tls::Pem::Text(std::sync::Arc::from(
                &b"x"[..],
            ))),
            client_cert: None,
        };
        let refused = config(
            "postgres://u:secret@127.0.0.1/db?sslmode=disable",
            None,
            &files,
            "app",
        );
        assert!(
            matches!(&refused, Err(Error::InvalidArgument(why)) if !why.contains("secret")),
            "{:?}",
            refused.err()
        );
    }
}
