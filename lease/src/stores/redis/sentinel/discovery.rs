//! The primary of a Sentinel-managed deployment, found by asking its Sentinels.
//!
//! A primary is named by a majority of the Sentinels or not at all: each Sentinel is asked
//! `SENTINEL MASTER <name>`, and of the answers, the one with the highest configuration epoch
//! wins (a Sentinel that has not heard of the last failover yet still names the old primary,
//! under an older epoch). The epoch comes with the address: it is the epoch the tokens of that
//! primary are drawn in (see `fencing::Epoch`). Fewer answers than a majority, or a primary the
//! winning Sentinel counts as down or failing over, and no primary is named: the caller gets
//! [`Error::Unavailable`] rather than a server that may no longer be the primary.

use super::ask::{ask, is_primary, View};
use crate::error::{Error, Result};
use crate::stores::redis::conn::{io_error, Conn, Endpoint};
use crate::stores::redis::fencing::Epoch;
use crate::stores::redis::pool::Opened;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

/// The Sentinels of one primary.
pub(crate) struct Sentinels {
    /// Each Sentinel, logged in to with database 0 (a Sentinel has no other).
    sentinels: Vec<Endpoint>,
    /// The name the Sentinels monitor the primary under.
    master: String,
    /// The login, transport and database of the data servers: those of the first Sentinel's URL.
    login: Endpoint,
    shown: String,
    /// The epochs this client has connected in and heard announced.
    succession: Mutex<Succession>,
}

/// The primary, as the Sentinels name it.
pub(crate) struct Primary {
    pub(crate) endpoint: Endpoint,
    /// The configuration epoch in which it became the primary.
    pub(crate) epoch: u64,
}

/// Once a majority of the Sentinels has answered, how much longer the others are waited for.
/// Sentinels on one network answer within milliseconds of each other; one that does not answer
/// costs a new connection this much, twice (the look-up and its confirmation).
pub(crate) const LATE_ANSWERS: Duration = Duration::from_millis(100);

impl Sentinels {
    /// The Sentinels at `sentinels` (at least one), monitoring `master`.
    pub(crate) fn new(sentinels: Vec<Endpoint>, master: &str) -> Result<Sentinels> {
        let login = sentinels.first().cloned().ok_or_else(|| {
            Error::InvalidArgument(
                "a Sentinel client needs the URL of at least one Sentinel".into(),
            )
        })?;
        if master.is_empty() || master.contains(char::is_whitespace) {
            return Err(Error::InvalidArgument(format!(
                "{master:?} is not a master name: a non-empty name without spaces is expected"
            )));
        }
        let shown = format!(
            "sentinel {master} at {}",
            sentinels
                .iter()
                .map(Endpoint::shown)
                .collect::<Vec<_>>()
                .join(",")
        );
        let sentinels = sentinels
            .into_iter()
            .map(|mut sentinel| {
                sentinel.db = 0;
                sentinel
            })
            .collect();
        Ok(Sentinels {
            sentinels,
            master: master.to_owned(),
            login,
            shown,
            succession: Mutex::new(Succession::default()),
        })
    }

    /// Each Sentinel.
    pub(crate) fn endpoints(&self) -> &[Endpoint] {
        &self.sentinels
    }

    /// The name the Sentinels monitor the primary under.
    pub(crate) fn master(&self) -> &str {
        &self.master
    }

    /// How the deployment is shown: the master name and the Sentinels' URLs, passwords hidden.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// The primary a majority of the Sentinels name, by `deadline`, of epoch `floor` or later.
    ///
    /// Every Sentinel is asked at once, each on a thread of its own, so that one that does not
    /// answer (frozen, cut off, a host that drops packets) costs the others nothing. Once a
    /// majority has answered, the rest get [`LATE_ANSWERS`] more: a Sentinel that already took
    /// part in a failover may name a newer primary than the majority has heard of yet. Answers
    /// that name a primary older than `floor` (a failover the client already heard of) are kept
    /// waiting on until the deadline, for a Sentinel that names a primary of `floor` or later.
    pub(crate) fn locate(&self, deadline: Instant, floor: u64) -> Result<Primary> {
        let (answers, asked) = crossbeam_channel::bounded(self.sentinels.len());
        for (index, sentinel) in self.sentinels.iter().enumerate() {
            let sentinel = sentinel.clone();
            let master = self.master.clone();
            let answer = answers.clone();
            let spawned = std::thread::Builder::new()
                .name("lease-sentinel-ask".into())
                .spawn(move || {
                    // The caller may have stopped listening: nothing to tell it then.
                    let _ = answer.send((index, ask(&sentinel, &master, deadline)));
                });
            if let Err(error) = spawned {
                let _ = answers.send((index, Err(Error::Spawn(error))));
            }
        }
        drop(answers);
        let majority = self.sentinels.len() / 2 + 1;
        let mut views = Vec::new();
        let mut last_error = None;
        let mut refusals = 0;
        let mut heard = 0;
        let mut wait_until = deadline;
        while heard < self.sentinels.len() {
            let Ok((index, answer)) = asked.recv_deadline(wait_until) else {
                break;
            };
            heard += 1;
            match answer {
                Ok(view) => {
                    if let Some(sentinel) = self.sentinels.get(index) {
                        self.succession.lock().saw(sentinel.shown(), &view);
                    }
                    views.push(view);
                }
                Err(error) => {
                    let shown = self.sentinels.get(index).map_or("?", Endpoint::shown);
                    log::debug!("sentinel {shown}: {error}");
                    if matches!(error, Error::Refused { .. }) {
                        refusals += 1;
                        last_error = Some(error);
                    } else if refusals == 0 {
                        last_error = Some(error);
                    }
                }
            }
            if views.len() + (self.sentinels.len() - heard) < majority {
                break; // A majority can no longer answer.
            }
            let newest = views.iter().map(|view| view.epoch).max();
            if views.len() >= majority && newest.is_some_and(|epoch| epoch >= floor) {
                wait_until = wait_until.min(Instant::now() + LATE_ANSWERS);
            }
        }
        if refusals > self.sentinels.len() - majority {
            // So many refused (a wrong password, an unknown master name) that no majority can
            // answer: no use retrying.
            if let Some(error @ Error::Refused { .. }) = last_error {
                return Err(error);
            }
        }
        if views.len() < majority {
            let why = last_error.map_or_else(String::new, |error| format!(" (last: {error})"));
            return Err(unavailable(format!(
                "{} of {} Sentinels of {:?} answered in time, fewer than a majority{why}",
                views.len(),
                self.sentinels.len(),
                self.master
            )));
        }
        let Some(view) = views.into_iter().max_by_key(|view| view.epoch) else {
            return Err(unavailable("no Sentinel answered".into()));
        };
        if view.epoch < floor {
            return Err(unavailable(format!(
                "the Sentinels of {:?} that answered name a primary of epoch {}, older than a \
                 failover already announced (epoch {floor} or later)",
                self.master, view.epoch
            )));
        }
        if ["s_down", "o_down", "failover_in_progress"]
            .iter()
            .any(|flag| view.flags.split(',').any(|set| set == *flag))
        {
            return Err(unavailable(format!(
                "the primary of {:?} at {}:{} is {}",
                self.master, view.host, view.port, view.flags
            )));
        }
        Ok(Primary {
            endpoint: self.login.at(&view.host, view.port),
            epoch: view.epoch,
        })
    }

    /// A connection to the primary, opened by `deadline`, with the epoch of its tokens: the
    /// primary is looked up, its server asked whether it is the primary, and the Sentinels asked
    /// again, which must name the same server. Any later reconfiguration of that server by the
    /// Sentinels closes the connection, so the epoch holds for as long as it is open.
    ///
    /// The first look-up has half the time left, so that the connect, `ROLE` and the second
    /// look-up keep a reserve; with every Sentinel asked at once, both look-ups usually take one
    /// round trip, and a Sentinel that does not answer costs each at most [`LATE_ANSWERS`].
    /// A primary older than one this client already used, or than one a Sentinel announced, is
    /// never connected to; one newer than the primary of every connection before supersedes
    /// them.
    pub(crate) fn connect(&self, deadline: Instant) -> Result<Opened> {
        let (floor, contradictions) = {
            let succession = self.succession.lock();
            (succession.floor(), succession.contradictions)
        };
        let now = Instant::now();
        let first_by = now + deadline.saturating_duration_since(now) / 2;
        let primary = self.locate(first_by, floor)?;
        let mut conn = Conn::connect(&primary.endpoint, deadline)?;
        conn.set_deadline(deadline);
        if !is_primary(&mut conn)? {
            return Err(unavailable(format!(
                "{} is not the primary (any more)",
                primary.endpoint.shown()
            )));
        }
        let confirmed = self.locate(deadline, floor)?;
        if confirmed.endpoint.addr != primary.endpoint.addr || confirmed.epoch != primary.epoch {
            return Err(unavailable(format!(
                "the primary moved from {} (epoch {}) to {} (epoch {}) while connecting",
                primary.endpoint.shown(),
                primary.epoch,
                confirmed.endpoint.shown(),
                confirmed.epoch
            )));
        }
        if confirmed.epoch > Epoch::MAX {
            return Err(Error::refused(redis::make_extension_error(
                "EPOCH".into(),
                Some(format!(
                    "the Sentinels' configuration epoch {} is past the largest a token can carry",
                    confirmed.epoch
                )),
            )));
        }
        let supersedes = {
            let mut succession = self.succession.lock();
            let floor = succession.floor();
            if succession.contradictions != contradictions {
                // Asked by this client's failover listeners in between, a Sentinel named
                // another server for the same epoch: the two looks above prove nothing.
                return Err(unavailable(format!(
                    "a Sentinel of {:?} named two servers as the primary of one configuration \
                     epoch while {} was being connected to",
                    self.master,
                    confirmed.endpoint.shown()
                )));
            }
            if confirmed.epoch < floor {
                // A failover was announced, or a newer primary reached, while this connection
                // was being opened.
                return Err(unavailable(format!(
                    "{} is of epoch {}, and a primary of epoch {floor} was announced meanwhile",
                    confirmed.endpoint.shown(),
                    confirmed.epoch
                )));
            }
            let before = succession.connected.replace(confirmed.epoch);
            before.is_some_and(|before| before < confirmed.epoch)
        };
        conn.set_epoch(Epoch::Known(confirmed.epoch));
        Ok(Opened { conn, supersedes })
    }

    /// Takes in that `sentinel` announced a new primary, or may have while it was not listened
    /// to: asks it which primary it names, by `deadline`, so that no primary older than that
    /// one is connected to from then on, whatever the other Sentinels still say. Returns
    /// whether that primary is newer than every one this client's connections reached (they
    /// must then all be dropped). A Sentinel that catches up late on an older failover raises
    /// nothing; one that cannot be asked leaves the choice to the next look-up.
    pub(crate) fn announced(&self, sentinel: &Endpoint, deadline: Instant) -> bool {
        match ask(sentinel, &self.master, deadline) {
            Ok(view) => {
                let mut succession = self.succession.lock();
                succession.saw(sentinel.shown(), &view);
                succession.announced = succession.announced.max(view.epoch);
                view.epoch > succession.connected.unwrap_or(0)
            }
            Err(error) => {
                log::debug!(
                    "sentinel {} could not be asked which primary it names: {error}",
                    sentinel.shown()
                );
                false
            }
        }
    }
}

/// What a client knows of the succession of primaries: the epochs it connected in, and that a
/// Sentinel announced.
#[derive(Default)]
struct Succession {
    /// The highest epoch of a primary that a connection was opened to, once one was.
    connected: Option<u64>,
    /// The highest epoch of a primary that a Sentinel announced.
    announced: u64,
    /// What each Sentinel (by its URL as shown) last named: the highest epoch it answered with,
    /// and the primary's address in it.
    named: HashMap<String, (u64, String)>,
    /// How many times a Sentinel named another server than before for the same epoch: a
    /// Sentinel that contradicts itself (broken or hostile), whose answers cannot be trusted.
    contradictions: u64,
}

impl Succession {
    /// Takes in what `sentinel` answered: a server other than the one it named before for the
    /// same epoch is a contradiction (an older epoch is a Sentinel catching up, a newer one a
    /// failover).
    fn saw(&mut self, sentinel: &str, view: &View) {
        let address = format!("{}:{}", view.host, view.port);
        match self.named.get_mut(sentinel) {
            Some((epoch, _)) if view.epoch < *epoch => {}
            Some((epoch, named)) if view.epoch == *epoch => {
                if *named != address {
                    self.contradictions += 1;
                    log::warn!(
                        "sentinel {sentinel} named {address} as the primary of epoch {epoch}, \
                         after naming {named} for it"
                    );
                    *named = address;
                }
            }
            Some(last) => *last = (view.epoch, address),
            None => {
                self.named
                    .insert(sentinel.to_owned(), (view.epoch, address));
            }
        }
    }

    /// The oldest epoch that a new connection's primary may have.
    fn floor(&self) -> u64 {
        self.connected.unwrap_or(0).max(self.announced)
    }
}

fn unavailable(text: String) -> Error {
    Error::unavailable(io_error(io::ErrorKind::NotConnected, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_master_name_must_be_a_word() {
        let sentinel = Endpoint::parse("redis://127.0.0.1:26379").expect("valid");
        for name in ["", "two words"] {
            assert!(matches!(
                Sentinels::new(vec![sentinel.clone()], name),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert!(matches!(
            Sentinels::new(Vec::new(), "m"),
            Err(Error::InvalidArgument(_))
        ));
    }

    fn view(port: u16, epoch: u64) -> View {
        View {
            host: "10.0.0.1".into(),
            port,
            epoch,
            flags: "master".into(),
        }
    }

    #[test]
    fn only_a_sentinel_naming_two_servers_for_one_epoch_contradicts_itself() {
        let mut succession = Succession::default();
        succession.saw("s1", &view(1, 3));
        succession.saw("s1", &view(1, 3));
        succession.saw("s2", &view(2, 2)); // Another Sentinel, catching up.
        succession.saw("s1", &view(2, 4)); // A failover.
        succession.saw("s1", &view(1, 3)); // An older answer, late.
        assert_eq!(succession.contradictions, 0);
        succession.saw("s1", &view(1, 4));
        assert_eq!(succession.contradictions, 1);
        succession.saw("s1", &view(2, 4));
        assert_eq!(succession.contradictions, 2, "every switch counts");
    }
}
