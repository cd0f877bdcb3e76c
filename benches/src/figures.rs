//! What the figures binaries share: their command line (`quick`, then section names) and their
//! percentiles.

/// What a figures binary was asked for.
pub struct Request {
    /// Small sizes, for a smoke run.
    pub quick: bool,
    sections: Vec<String>,
}

impl Request {
    /// From the arguments after the program's name: `quick` anywhere, and any section names.
    pub fn from_args(args: &[String]) -> Request {
        Request {
            quick: args.iter().any(|arg| arg == "quick"),
            sections: args.iter().filter(|arg| *arg != "quick").cloned().collect(),
        }
    }

    /// Whether to run `section`: named, or no section named at all.
    pub fn wants(&self, section: &str) -> bool {
        self.sections.is_empty() || self.sections.iter().any(|name| name == section)
    }
}

/// The machine's load (`/proc/loadavg`), printed at a run's start and end: the figures depend
/// on it.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |error| format!("unreadable ({error})"),
        |load| load.trim().to_owned(),
    )
}

/// The median of `values` (the upper one of the middle two when their count is even).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The `q` quantile of sorted samples (the sample at rank `q * (n - 1)`, rounded down).
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> T {
    sorted[((sorted.len() - 1) as f64 * q) as usize]
}
