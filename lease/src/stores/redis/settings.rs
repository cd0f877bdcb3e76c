//! [`RedisSettings`]: what every Redis deployment is built from (the builder's settings as given,
//! beside the common ones), and the checks that more than one deployment makes of them.

use crate::backend::Settings;
use crate::error::{Error, Result};
use crate::stores::redis::conn::{tls_config, Endpoint};
use crate::stores::redis::pool::{Pool, Target};
use crate::stores::redis::scripts::Acks;
use std::ops::Deref;
use std::time::Duration;

/// The builder's Redis settings, as given; each deployment checks those it takes.
#[derive(Clone)]
pub(crate) struct RedisSettings {
    /// The settings every store takes.
    pub(crate) common: Settings,
    /// Idle connections kept per server.
    pub(crate) pool_size: usize,
    /// The most connections lent to calls at once per server, if capped.
    pub(crate) max_connections: Option<usize>,
    /// Whether threads' calls to a server share one pipelined connection.
    pub(crate) pipelining: bool,
    /// The replica acknowledgements asked for, unchecked: see [`Settings::primary_acks`].
    pub(crate) acks: Option<Acks>,
    /// RedLock's own: how many masters must grant a lock, and the longest pause between two
    /// attempts. Refused by every other deployment.
    pub(crate) quorum: Option<usize>,
    pub(crate) retry_delay: Option<Duration>,
}

impl Deref for RedisSettings {
    type Target = Settings;

    fn deref(&self) -> &Settings {
        &self.common
    }
}

impl Default for RedisSettings {
    /// The builder's defaults: 8 idle connections per server, pipelined.
    fn default() -> RedisSettings {
        RedisSettings {
            common: Settings::default(),
            pool_size: 8,
            max_connections: None,
            pipelining: true,
            acks: None,
            quorum: None,
            retry_delay: None,
        }
    }
}

impl RedisSettings {
    /// The endpoints of `urls`, with the password and TLS settings applied.
    pub(crate) fn endpoints<'a>(
        &self,
        urls: impl IntoIterator<Item = &'a String>,
    ) -> Result<Vec<Endpoint>> {
        let mut endpoints = Vec::new();
        let mut tls = None;
        for url in urls {
            let mut endpoint = Endpoint::parse(url)?;
            if let Some(password) = &self.password {
                endpoint = endpoint.with_password(password);
            }
            if endpoint.is_tls() {
                let config = match &tls {
                    Some(config) => config,
                    None => tls.insert(tls_config(&self.tls)?),
                };
                endpoint = endpoint.with_tls(config);
            }
            endpoints.push(endpoint);
        }
        Ok(endpoints)
    }

    /// A pool of connections to `target`, of the pool size, timeouts and sharing asked for
    /// (without replica acknowledgements: see [`Pool::with_acks`]).
    pub(crate) fn pool(&self, target: Box<dyn Target>) -> Pool {
        Pool::to(
            target,
            self.pool_size,
            self.connect_timeout,
            self.command_timeout,
        )
        .with_sharing(self.pipelining)
        .with_cap(self.max_connections)
    }

    /// For a deployment whose every lock has one primary (all but RedLock): RedLock's own
    /// settings refused, and the replica acknowledgements asked for, checked against the command
    /// timeout.
    pub(crate) fn primary_acks(&self) -> Result<Option<Acks>> {
        if self.quorum.is_some() || self.retry_delay.is_some() {
            return Err(Error::InvalidArgument(
                "quorum and retry_delay are RedLock settings (Client::redlock)".into(),
            ));
        }
        let Some(acks) = self.acks else {
            return Ok(None);
        };
        if acks.replicas == 0 {
            return Err(Error::InvalidArgument(
                "replica acknowledgements: at least one replica is needed (or leave them off)"
                    .into(),
            ));
        }
        if acks.replicas > Acks::MAX_REPLICAS {
            // WAIT refuses a count it cannot read as a signed 64-bit number, and every write
            // would then fail after it ran.
            return Err(Error::InvalidArgument(format!(
                "replica acknowledgements: {} replicas is more than WAIT takes (at most {})",
                acks.replicas,
                Acks::MAX_REPLICAS
            )));
        }
        if acks.timeout.is_zero() || acks.timeout >= self.command_timeout {
            return Err(Error::InvalidArgument(format!(
                "replica acknowledgements: the wait ({:?}) must be above zero and below the \
                 command timeout ({:?}), which it is part of",
                acks.timeout, self.command_timeout
            )));
        }
        Ok(Some(acks))
    }
}
