//! Model-based test: random operations on a small namespace run against
//! WOFS and the shared reference model ([`fsapi::testing::agree_with_the_model`]),
//! with power failures in between; every operation must agree with the
//! model on success or failure, and the trees must be equal after every
//! step and every remount.

mod common;

#[test]
fn random_operations_and_power_failures_agree_with_the_model() {
    fsapi::testing::agree_with_the_model::<common::W>(0..24);
}
