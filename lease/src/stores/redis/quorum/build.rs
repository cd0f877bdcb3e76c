//! Building a RedLock from the settings: the checks of its masters and its quorum, and the
//! refusal of two URLs of one server.

use super::masters::Quorum;
use super::RedLock;
use crate::backend::Backend;
use crate::backend::ServerIdentity;
use crate::error::{Error, Result};
use crate::stores::redis::conn::{Conn, Endpoint};
use crate::stores::redis::fanout::Master;
use crate::stores::redis::pool::{identity_of, Pool};
use crate::stores::redis::settings::RedisSettings;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A RedLock over the masters at `endpoints` (at least one, each its own server), of which
/// `settings.quorum` (by default N/2+1) must grant a lock.
pub(crate) fn build(
    settings: &RedisSettings,
    endpoints: Vec<Endpoint>,
) -> Result<Box<dyn Backend>> {
    if settings.acks.is_some() {
        return Err(Error::InvalidArgument(
            "replica acknowledgements are not for RedLock, whose masters vote instead".into(),
        ));
    }
    let count = endpoints.len();
    if count == 0 {
        return Err(Error::InvalidArgument(
            "a RedLock needs at least one master".into(),
        ));
    }
    let quorum = settings.quorum.unwrap_or(count / 2 + 1);
    if quorum <= count / 2 || quorum > count {
        return Err(Error::InvalidArgument(format!(
            "a quorum of {quorum} over {count} masters cannot work: it must be from {} to {count}",
            count / 2 + 1
        )));
    }
    let mut distinct: Vec<Endpoint> = Vec::with_capacity(count);
    for endpoint in endpoints {
        if let Some(twin) = distinct
            .iter()
            .find(|seen| seen.addr == endpoint.addr && seen.db == endpoint.db)
        {
            return Err(Error::InvalidArgument(format!(
                "masters {:?} and {:?} are one server: RedLock needs independent masters",
                twin.shown(),
                endpoint.shown()
            )));
        }
        distinct.push(endpoint);
    }
    Ok(Box::new(RedLock::new(
        Quorum::new(distinct, quorum, settings)?,
        &settings.prefix,
    )))
}

impl Quorum {
    /// Masters that are up are asked who they are, so that two URLs of one server are refused
    /// now; a master that is down is allowed, and refused when it comes up if it turns out to
    /// be another master's server.
    fn new(endpoints: Vec<Endpoint>, quorum: usize, settings: &RedisSettings) -> Result<Quorum> {
        let node_timeout = settings.command_timeout;
        let count = endpoints.len();
        let known: Arc<Mutex<Vec<Option<ServerIdentity>>>> =
            Arc::new(Mutex::new(vec![None; count]));
        let shown: Arc<Vec<String>> = Arc::new(
            endpoints
                .iter()
                .map(|endpoint| endpoint.shown().to_owned())
                .collect(),
        );
        let masters: Vec<Master> = endpoints
            .into_iter()
            .enumerate()
            .map(|(index, endpoint)| {
                let (known, shown) = (Arc::clone(&known), Arc::clone(&shown));
                let check = Arc::new(move |conn: &mut Conn| {
                    let identity = &identity_of(conn)?;
                    let mut known = known.lock();
                    let twin = known.iter().enumerate().find(|(other, seen)| {
                        *other != index
                            && seen.as_ref().is_some_and(|seen| seen.same_server(identity))
                    });
                    if let Some((other, _)) = twin {
                        return Err(Error::InvalidArgument(format!(
                            "masters {:?} and {:?} are one server: RedLock needs independent masters",
                            shown[other], shown[index]
                        )));
                    }
                    known[index] = Some(identity.clone());
                    Ok(())
                });
                let timeout = node_timeout;
                let pool = Pool::new(endpoint, settings.pool_size, timeout, timeout)
                    .with_cap(settings.max_connections);
                Master::new(pool.with_admission(check))
            })
            .collect();
        let probe_by = Instant::now() + node_timeout;
        let refused = std::thread::scope(|scope| {
            let probes: Vec<_> = masters
                .iter()
                .map(|master| scope.spawn(move || master.pool.get(probe_by).map(drop)))
                .collect();
            probes
                .into_iter()
                .filter_map(|probe| probe.join().ok())
                .find_map(|probe| match probe {
                    Err(error @ Error::InvalidArgument(_)) => Some(error),
                    _ => None,
                })
        });
        if let Some(error) = refused {
            return Err(error);
        }
        let id = &settings.client_id;
        Ok(Quorum {
            masters: Arc::new(masters),
            quorum,
            node_timeout,
            retry_delay: settings.retry_delay.unwrap_or(Duration::from_millis(20)),
            random: Mutex::new(
                u64::from_str_radix(&id[..16], 16).unwrap_or(0x9e37_79b9_7f4a_7c15) | 1,
            ),
            place: shown.join(","),
        })
    }
}
