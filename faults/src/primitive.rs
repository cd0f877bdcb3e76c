//! Which primitive a scenario's clients take, and what bounds its holders.

/// Which primitive the clients take, named `jobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Primitive {
    /// A lock: one holder at a time.
    Lock,
    /// A semaphore of this many permits: at most that many holders at a time.
    Semaphore(u32),
    /// A read-write lock: each thread writes one cycle in three and reads in the others; a
    /// writer holds it alone.
    ReadWrite,
    /// A leader election: each cycle a campaign, each term a hold that writes fenced by the
    /// term; one leader at a time. Each client process also observes the election.
    Election,
}

impl Primitive {
    /// The primitive as `fault_client` takes it in `FAULT_PRIMITIVE`.
    pub fn arg(self) -> String {
        match self {
            Primitive::Lock => "lock".into(),
            Primitive::Semaphore(permits) => format!("semaphore:{permits}"),
            Primitive::ReadWrite => "rw".into(),
            Primitive::Election => "election".into(),
        }
    }

    /// The primitive `FAULT_PRIMITIVE` names (a lock if it names none).
    pub fn parse(text: &str) -> Option<Primitive> {
        match text {
            "" | "lock" => Some(Primitive::Lock),
            "rw" => Some(Primitive::ReadWrite),
            "election" => Some(Primitive::Election),
            other => other
                .strip_prefix("semaphore:")
                .and_then(|permits| permits.parse().ok())
                .filter(|&permits| permits > 0)
                .map(Primitive::Semaphore),
        }
    }

    /// How many holds may overlap a hold of `side` (`""` a lock's, `"permit"`, `"read"`,
    /// `"write"`): for a window, the most windows of other clients that may be open beside it.
    pub fn exclusive(self, side: &str) -> bool {
        match self {
            Primitive::Lock | Primitive::Election => true,
            Primitive::Semaphore(_) => false,
            Primitive::ReadWrite => side == "write",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_travel_as_text() {
        for primitive in [
            Primitive::Lock,
            Primitive::Semaphore(3),
            Primitive::ReadWrite,
            Primitive::Election,
        ] {
            assert_eq!(Primitive::parse(&primitive.arg()), Some(primitive));
        }
        assert_eq!(Primitive::parse("semaphore:0"), None);
        assert_eq!(Primitive::parse("queue"), None);
    }
}
