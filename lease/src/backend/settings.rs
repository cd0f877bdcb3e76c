//! [`Settings`]: what every store is built from, whatever it is: the timeouts, the client's id
//! and key prefix, and which settings the caller gave, so that a store refuses those it cannot
//! honour rather than ignore them.

use crate::error::{Error, Result};
use deadline_net::tls::TlsFiles;
use std::collections::BTreeSet;
use std::time::Duration;

/// The builder's settings that every store takes.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    /// The client's random id, drawn when the client is built.
    pub(crate) client_id: String,
    /// The prefix of every key, channel or node path of the client's locks.
    pub(crate) prefix: String,
    /// The builder settings the caller gave, by their method's name (`password`,
    /// `zookeeper_auth`, ...).
    pub(crate) given: BTreeSet<&'static str>,
    /// The password to log in with, in place of any in the URLs (never shown).
    pub(crate) password: Option<String>,
    /// The TLS files (a CA, a client certificate) of stores reached over TLS.
    pub(crate) tls: TlsFiles,
}

impl Default for Settings {
    /// The builder's defaults: 2 s to connect and for a call.
    fn default() -> Settings {
        Settings {
            connect_timeout: Duration::from_secs(2),
            command_timeout: Duration::from_secs(2),
            client_id: String::new(),
            prefix: String::new(),
            given: BTreeSet::new(),
            password: None,
            tls: TlsFiles::default(),
        }
    }
}

impl Settings {
    /// The name of the client's thread (or threads) doing `job`: `lease-<job>-` and the start of
    /// the client's id.
    pub(crate) fn thread_name(&self, job: &str) -> String {
        format!("lease-{job}-{}", &self.client_id[..8])
    }

    /// Refuses the first of `settings` the caller gave: `store` cannot honour it, `why`.
    pub(crate) fn refuse(&self, settings: &[&str], store: &str, why: &str) -> Result<()> {
        match settings
            .iter()
            .find(|setting| self.given.contains(*setting))
        {
            Some(setting) => Err(Error::InvalidArgument(format!(
                "{setting} cannot be honoured on {store}: {why}"
            ))),
            None => Ok(()),
        }
    }
}
