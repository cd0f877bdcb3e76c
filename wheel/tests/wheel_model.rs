//! Random insert / cancel / advance sequences against a reference model: the same values expire at
//! the same ticks, none early, none twice, none lost.

mod support;

use proptest::prelude::*;
use support::model::{check, ops_from_bytes, Op, Reach};

fn reach() -> impl Strategy<Value = Reach> {
    prop_oneof![
        4 => (0u64..600).prop_map(Reach::Near),
        2 => (0u64..200_000).prop_map(Reach::Near),
        1 => any::<u64>().prop_map(|n| Reach::Far(n >> (n % 64))),
        1 => (0u64..40).prop_map(Reach::Past),
        1 => (0u64..4).prop_map(Reach::End),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => reach().prop_map(Op::Insert),
        3 => any::<usize>().prop_map(Op::Cancel),
        3 => (0u64..700).prop_map(Op::Advance),
        1 => (0u64..5_000_000).prop_map(Op::Advance),
        1 => ((0u64..700), (0usize..6)).prop_map(|(by, take)| Op::AdvancePartly(by, take)),
        1 => Just(Op::AdvanceToEnd),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn wheel_agrees_with_the_model(slots_log2 in 0u32..=10, ops in prop::collection::vec(op(), 1..300)) {
        if let Err(disagreement) = check(1 << slots_log2, &ops) {
            prop_assert!(false, "{}", disagreement);
        }
    }

    #[test]
    fn decoded_fuzz_inputs_agree_with_the_model(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let (slots, ops) = ops_from_bytes(&bytes);
        if let Err(disagreement) = check(slots, &ops) {
            prop_assert!(false, "{}", disagreement);
        }
    }
}

#[test]
fn cancel_after_expiry_agrees_and_a_bad_slot_count_is_reported() {
    let ops = [Op::Insert(Reach::Near(5)), Op::Advance(5), Op::Cancel(0)];
    assert!(check(8, &ops).is_ok());
    assert!(check(3, &ops).is_err());
}
