//! Checks shared by the tests of several deployments.
#![allow(dead_code)]

pub mod election;
pub mod methods;
pub mod primitives;
