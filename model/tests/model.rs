//! The lock protocol's model checked at the bound `scripts/test` affords: its properties hold
//! inside the stated assumptions, and every planted bug, or assumption broken, is found.

use lease_model::{Assumptions, Bounds, Bugs, LeaseModel, EXCLUSION, ORDER};
use stateright::{Checker, Model};

/// Whether a search finds a counterexample of `property` in `model`.
fn breaks(model: LeaseModel, property: &'static str) -> bool {
    let checked: &'static [&'static str] = if property == EXCLUSION {
        &[EXCLUSION]
    } else {
        &[ORDER]
    };
    let checker = LeaseModel { checked, ..model }.checker().spawn_bfs().join();
    checker.discovery(property).is_some()
}

fn with_bugs(bugs: Bugs) -> LeaseModel {
    LeaseModel {
        bugs,
        ..LeaseModel::new(Bounds::SMALL)
    }
}

#[test]
fn the_protocol_keeps_its_properties_inside_the_assumptions() {
    let checker = LeaseModel::new(Bounds::SMALL).checker().spawn_bfs().join();
    checker.assert_properties();
    assert!(checker.is_done(), "every reachable state was visited");
}

#[test]
fn a_deadline_counted_from_the_reply_lets_two_believe() {
    assert!(breaks(
        with_bugs(Bugs {
            deadline_from_reply: true,
            ..Bugs::NONE
        }),
        EXCLUSION
    ));
}

#[test]
fn a_release_that_ignores_the_owner_lets_two_believe() {
    assert!(breaks(
        with_bugs(Bugs {
            release_ignores_owner: true,
            ..Bugs::NONE
        }),
        EXCLUSION
    ));
}

#[test]
fn a_token_not_raised_is_found() {
    assert!(breaks(
        with_bugs(Bugs {
            token_not_raised: true,
            ..Bugs::NONE
        }),
        ORDER
    ));
}

#[test]
fn a_hand_off_with_a_fresh_deadline_lets_two_believe() {
    assert!(breaks(
        with_bugs(Bugs {
            handoff_fresh_deadline: true,
            ..Bugs::NONE
        }),
        EXCLUSION
    ));
}

#[test]
fn a_margin_short_of_the_drift_lets_two_believe() {
    let model = LeaseModel {
        assumptions: Assumptions {
            margin: 0,
            ..Assumptions::STATED
        },
        ..LeaseModel::new(Bounds::SMALL)
    };
    assert!(breaks(model, EXCLUSION));
}

#[test]
fn a_failover_without_acknowledgements_lets_two_believe() {
    let model = LeaseModel {
        assumptions: Assumptions {
            acks: false,
            ..Assumptions::STATED
        },
        ..LeaseModel::new(Bounds::SMALL)
    };
    assert!(breaks(model, EXCLUSION));
}
