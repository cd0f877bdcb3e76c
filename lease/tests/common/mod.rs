//! Checks shared by the tests of several deployments.
#![allow(dead_code)]

pub mod methods;
pub mod primitives;
