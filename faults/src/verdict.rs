//! What a scenario came to, from what the checker and the servers' logs found: the report's last
//! column, and what decides the suite's exit code.

use crate::checker::Findings;
use std::fmt;

/// What a scenario came to, shown in the report as `pass`, `as expected`, `inconclusive` or
/// `FAIL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Inside the timing assumptions, nothing found.
    Pass,
    /// Outside the timing assumptions, only overlaps and lost updates found.
    AsExpected,
    /// The fault never took effect.
    Inconclusive,
    /// Anywhere, a stale write accepted, a lease of another owner touched, an old primary's
    /// copy of the lock different from the new primary's, an election's observer that went
    /// back to an older term, or a client that ended before its time (the checks then cover
    /// fewer clients than ran); inside the timing assumptions, an
    /// overlap, a token that did not rise, a lost update, or an acquisition that failed with an
    /// error a wait does not ride out. (Outside them, a hold that Redis lost while its client
    /// still believes in it may be handed on in memory with a token reserved before the token of
    /// another client's later hold: out of time order, and refused by the fence.)
    Fail,
}

/// What a verdict is drawn from, besides the checker's findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judged {
    /// Whether the fault stays inside the timing assumptions.
    pub inside: bool,
    /// Whether a fault was to be injected and none took effect.
    pub ineffective: bool,
    /// Whether a script wrote to a lease that was not its caller's.
    pub foreign_touches: bool,
    /// Whether an old primary back as a replica had a copy of the lock that differed from the
    /// new primary's.
    pub diverged: bool,
    /// Whether a client process, or a worker of one, ended before its time.
    pub ended_early: bool,
}

impl Verdict {
    /// The verdict on a scenario whose clients and servers showed `findings`.
    pub fn of(findings: &Findings, judged: Judged) -> Verdict {
        if findings.stale_accepted > 0
            || findings.observer_regressions > 0
            || judged.foreign_touches
            || judged.diverged
            || judged.ended_early
        {
            Verdict::Fail
        } else if judged.ineffective {
            Verdict::Inconclusive
        } else if !judged.inside {
            Verdict::AsExpected
        } else if findings.overlaps > 0
            || findings.token_violations > 0
            || findings.lost_updates != 0
            || findings.unexpected_errors > 0
        {
            Verdict::Fail
        } else {
            Verdict::Pass
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "pass",
            Verdict::AsExpected => "as expected",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Fail => "FAIL",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: Judged = Judged {
        inside: true,
        ineffective: false,
        foreign_touches: false,
        diverged: false,
        ended_early: false,
    };

    const OUTSIDE: Judged = Judged {
        inside: false,
        ..CLEAN
    };

    #[test]
    fn verdicts_read_as_the_report_prints_them() {
        let words: Vec<String> = [
            Verdict::Pass,
            Verdict::AsExpected,
            Verdict::Inconclusive,
            Verdict::Fail,
        ]
        .iter()
        .map(Verdict::to_string)
        .collect();
        assert_eq!(words, ["pass", "as expected", "inconclusive", "FAIL"]);
    }

    #[test]
    fn overlaps_fail_inside_the_assumptions_and_are_expected_outside() {
        let overlapping = Findings {
            overlaps: 1,
            ..Findings::default()
        };
        assert_eq!(Verdict::of(&overlapping, CLEAN), Verdict::Fail);
        assert_eq!(Verdict::of(&overlapping, OUTSIDE), Verdict::AsExpected);
        assert_eq!(Verdict::of(&Findings::default(), CLEAN), Verdict::Pass);
    }

    #[test]
    fn an_error_a_wait_does_not_ride_out_fails_inside_the_assumptions() {
        let unexpected = Findings {
            errors: 3,
            unexpected_errors: 1,
            first_unexpected: Some("unexpected reply: ...".into()),
            ..Findings::default()
        };
        assert_eq!(Verdict::of(&unexpected, CLEAN), Verdict::Fail);
        assert_eq!(Verdict::of(&unexpected, OUTSIDE), Verdict::AsExpected);
        let passing = Findings {
            errors: 3,
            ..Findings::default()
        };
        assert_eq!(Verdict::of(&passing, CLEAN), Verdict::Pass);
    }

    #[test]
    fn a_fault_that_never_took_effect_is_inconclusive_unless_something_broke() {
        let ineffective = Judged {
            ineffective: true,
            ..OUTSIDE
        };
        assert_eq!(
            Verdict::of(&Findings::default(), ineffective),
            Verdict::Inconclusive
        );
        let diverged = Judged {
            diverged: true,
            ..ineffective
        };
        assert_eq!(Verdict::of(&Findings::default(), diverged), Verdict::Fail);
    }

    #[test]
    fn broken_fencing_or_a_foreign_touch_fails_outside_the_assumptions_too() {
        let stale = Findings {
            stale_accepted: 1,
            ..Findings::default()
        };
        assert_eq!(Verdict::of(&stale, OUTSIDE), Verdict::Fail);
        let gone_back = Findings {
            observer_regressions: 1,
            ..Findings::default()
        };
        assert_eq!(Verdict::of(&gone_back, OUTSIDE), Verdict::Fail);
        let out_of_order = Findings {
            token_violations: 1,
            ..Findings::default()
        };
        assert_eq!(Verdict::of(&out_of_order, CLEAN), Verdict::Fail);
        assert_eq!(Verdict::of(&out_of_order, OUTSIDE), Verdict::AsExpected);
        let touched = Judged {
            foreign_touches: true,
            ..OUTSIDE
        };
        assert_eq!(Verdict::of(&Findings::default(), touched), Verdict::Fail);
    }

    #[test]
    fn a_client_that_ended_before_its_time_fails_inside_and_outside_the_assumptions() {
        for judged in [CLEAN, OUTSIDE] {
            let ended_early = Judged {
                ended_early: true,
                ..judged
            };
            assert_eq!(
                Verdict::of(&Findings::default(), ended_early),
                Verdict::Fail,
                "{judged:?}"
            );
        }
        let ineffective = Judged {
            ineffective: true,
            ended_early: true,
            ..OUTSIDE
        };
        assert_eq!(
            Verdict::of(&Findings::default(), ineffective),
            Verdict::Fail
        );
    }
}
