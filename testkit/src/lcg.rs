//! A small deterministic generator, so that a run driven by a seed can be replayed.

/// A linear congruential generator (Knuth's MMIX constants), seeded by the caller.
pub struct Lcg(pub u64);

impl Lcg {
    /// The next number below `bound` (below 1 when `bound` is 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound.max(1)
    }
}
