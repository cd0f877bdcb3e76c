//! [`Leader`]: an election's leader, as observers see it.

/// An election's leader, as observers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// Its term: a fencing token, above every term before it.
    pub term: u64,
    /// The value it last proclaimed.
    pub value: String,
}
