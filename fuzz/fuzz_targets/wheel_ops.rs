//! Random insert / cancel / advance sequences against the reference model: the same body as the
//! property test in `wheel/tests/wheel_model.rs`.
#![no_main]

#[path = "../../wheel/tests/support/model.rs"]
mod model;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let (slots, ops) = model::ops_from_bytes(bytes);
    if let Err(disagreement) = model::check(slots, &ops) {
        panic!("{disagreement}");
    }
});
