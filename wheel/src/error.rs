//! The errors a timer returns. Each operation's error hands back what the caller gave it.

use std::fmt;
use std::time::Duration;

/// A timer could not be built from its settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The tick is shorter than [`MIN_TICK`](crate::MIN_TICK).
    #[error("the tick must be at least {min:?}, not {given:?}", min = crate::MIN_TICK)]
    TickTooShort {
        /// The tick asked for.
        given: Duration,
    },
    /// The ring size is zero or above [`MAX_SLOTS`](crate::MAX_SLOTS) (before rounding up).
    #[error("ticks per wheel must be from 1 to {max}, not {given}", max = crate::MAX_SLOTS)]
    TicksPerWheel {
        /// The size asked for.
        given: usize,
    },
    /// `max_pending` is zero.
    #[error("max_pending must be at least 1")]
    ZeroMaxPending,
    /// The shard count is zero or above [`MAX_SHARDS`](crate::MAX_SHARDS) (before rounding up).
    #[error("shards must be from 1 to {max}, not {given}", max = crate::MAX_SHARDS)]
    Shards {
        /// The count asked for.
        given: usize,
    },
    /// The worker thread could not be started. The message includes the system's; the error has
    /// no [`source`](std::error::Error::source), so that a report of the chain says it once.
    #[error("could not start the timer thread: {0}")]
    Spawn(std::io::Error),
}

/// A task was not scheduled. Each variant hands the task back.
#[non_exhaustive]
pub enum ScheduleError<F> {
    /// The timer was stopped (or every [`Timer`](crate::Timer) handle dropped).
    Stopped(F),
    /// The timer already holds its `max_pending` tasks.
    TooManyPending(F),
    /// A recurring task was given a zero period.
    ZeroPeriod(F),
}

impl<F> ScheduleError<F> {
    /// The task that was not scheduled.
    pub fn into_task(self) -> F {
        match self {
            ScheduleError::Stopped(task)
            | ScheduleError::TooManyPending(task)
            | ScheduleError::ZeroPeriod(task) => task,
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            ScheduleError::Stopped(_) => "the timer is stopped",
            ScheduleError::TooManyPending(_) => "the timer holds its maximum of pending tasks",
            ScheduleError::ZeroPeriod(_) => "a recurring task needs a period above zero",
        }
    }
}

impl<F> fmt::Debug for ScheduleError<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            ScheduleError::Stopped(_) => "Stopped",
            ScheduleError::TooManyPending(_) => "TooManyPending",
            ScheduleError::ZeroPeriod(_) => "ZeroPeriod",
        };
        write!(f, "{name}(..)")
    }
}

impl<F> fmt::Display for ScheduleError<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task not scheduled: {}", self.reason())
    }
}

impl<F> std::error::Error for ScheduleError<F> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// Each message in an error's chain of sources, outermost first.
    fn chain(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
        let mut texts = vec![error.to_string()];
        let mut next = error.source();
        while let Some(source) = next {
            texts.push(source.to_string());
            next = source.source();
        }
        texts
    }

    #[test]
    fn a_report_of_the_chain_says_each_cause_once() {
        let errors = [
            BuildError::Spawn(std::io::Error::other("no more threads")),
            BuildError::TickTooShort {
                given: Duration::ZERO,
            },
            BuildError::ZeroMaxPending,
        ];
        for error in &errors {
            let texts = chain(error);
            for (i, text) in texts.iter().enumerate().skip(1) {
                assert!(
                    !texts[..i].iter().any(|outer| outer.contains(text.as_str())),
                    "{texts:?}"
                );
            }
        }
        assert!(errors[0].to_string().contains("no more threads"));
        assert!(errors[0].source().is_none());
    }
}
