//! [`Seen`]: what an observer has reported of an election, and which reads change it. A read may
//! be older than one before it (a reply overtaken, a read from before a failover): an observer
//! never goes back to an older term, nor shows again a term it saw end.

use super::leader::Leader;
use crate::backend::Leading;

/// The leader an observer last reported, and the newest term it has read.
#[derive(Debug, Default)]
pub(super) struct Seen {
    shown: Option<Leader>,
    /// The newest term read, proclaimed or not.
    newest: u64,
    /// Whether the newest term was read to be over.
    newest_over: bool,
}

impl Seen {
    /// The leader last reported.
    #[cfg(test)]
    pub(super) fn shown(&self) -> Option<&Leader> {
        self.shown.as_ref()
    }

    /// Takes in a read of the election: the change to report, if it is one.
    pub(super) fn read(&mut self, read: Option<Leading>) -> Option<Option<Leader>> {
        if let Some(leading) = read.as_ref().filter(|leading| leading.term > self.newest) {
            self.newest = leading.term;
            self.newest_over = false;
        }
        match read {
            Some(Leading { term, .. })
                if term < self.newest || (term == self.newest && self.newest_over) =>
            {
                None
            }
            Some(Leading {
                term,
                value: Some(value),
                ..
            }) => {
                let leader = Leader { term, value };
                (self.shown.as_ref() != Some(&leader)).then(|| self.show(Some(leader)))
            }
            // A new term whose leader has not proclaimed yet: the one shown is over.
            Some(Leading { value: None, .. }) => self.shown.is_some().then(|| self.show(None)),
            None => {
                self.newest_over = true;
                self.shown.is_some().then(|| self.show(None))
            }
        }
    }

    fn show(&mut self, leader: Option<Leader>) -> Option<Leader> {
        self.shown.clone_from(&leader);
        leader
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leading(term: u64, value: Option<&str>) -> Option<Leading> {
        Some(Leading {
            term,
            value: value.map(str::to_owned),
            ttl: None,
        })
    }

    fn leader(term: u64, value: &str) -> Option<Leader> {
        Some(Leader {
            term,
            value: value.to_owned(),
        })
    }

    #[test]
    fn terms_and_proclamations_are_reported_once_each_in_order() {
        let mut seen = Seen::default();
        assert_eq!(seen.read(None), None, "nothing to report yet");
        assert_eq!(seen.read(leading(5, None)), None, "not proclaimed yet");
        assert_eq!(seen.read(leading(5, Some("a"))), Some(leader(5, "a")));
        assert_eq!(seen.read(leading(5, Some("a"))), None, "no change");
        assert_eq!(seen.read(leading(5, Some("b"))), Some(leader(5, "b")));
        assert_eq!(seen.read(leading(9, None)), Some(None), "term 5 is over");
        assert_eq!(seen.read(leading(9, Some("c"))), Some(leader(9, "c")));
        assert_eq!(seen.read(None), Some(None));
        assert_eq!(seen.read(None), None);
        assert_eq!(seen.shown(), None);
    }

    #[test]
    fn an_older_term_or_one_seen_over_is_never_shown_again() {
        let mut seen = Seen::default();
        assert_eq!(seen.read(leading(7, Some("new"))), Some(leader(7, "new")));
        assert_eq!(seen.read(leading(6, Some("old"))), None, "older");
        assert_eq!(seen.read(None), Some(None));
        assert_eq!(seen.read(leading(7, Some("new"))), None, "seen over");
        assert_eq!(seen.read(leading(6, Some("old"))), None);
        assert_eq!(seen.read(leading(8, Some("next"))), Some(leader(8, "next")));
        assert_eq!(seen.shown(), leader(8, "next").as_ref());
    }
}
