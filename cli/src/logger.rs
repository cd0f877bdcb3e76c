//! The tool's logger: every message on stderr is a log record, the tool's own and the lock
//! library's, filtered by `$LEASE_LOG` (`env_logger`'s syntax: `debug`, `redis_lease::watchdog=trace`;
//! `$RUST_LOG` when `$LEASE_LOG` is unset) and by `-v`/`-q`, and written through the
//! non-blocking stderr thread of `say`.
//!
//! Levels: `error` is the line that explains a failing exit code, `warn` what went wrong on the
//! way (a lease lost, a command stopped, a renewal or release that failed), `info` what the tool
//! does (acquired, released), `debug` and `trace` the library's detail.

use log::{Level, LevelFilter};
use std::io::Write;
use std::sync::OnceLock;
use std::time::Instant;

/// The variable that holds the log filter.
pub const FILTER_VARIABLE: &str = "LEASE_LOG";

/// The variable read for the filter when [`FILTER_VARIABLE`] is unset, as Rust programs do.
pub const RUST_FILTER_VARIABLE: &str = "RUST_LOG";

/// How many `-v` and `-q` were given, passed on to the tool's own helper processes.
static FLAGS: OnceLock<(u8, u8)> = OnceLock::new();

/// The level `-v` and `-q` ask for, counted from `warn`: `-q` error, `-qq` nothing, `-v` debug,
/// `-vv` trace. `None` when neither was given.
fn level(verbose: u8, quiet: u8) -> Option<LevelFilter> {
    let steps = i16::from(verbose) - i16::from(quiet);
    (verbose > 0 || quiet > 0).then_some(match steps {
        i16::MIN..=-2 => LevelFilter::Off,
        -1 => LevelFilter::Error,
        0 => LevelFilter::Warn,
        1 => LevelFilter::Debug,
        2..=i16::MAX => LevelFilter::Trace,
    })
}

/// Installs the logger: `warn` and above unless `$LEASE_LOG` (else `$RUST_LOG`) says otherwise;
/// the level of `-v` and `-q`, when given, over the one the variable gives (its per-module
/// levels stay).
pub fn install(verbose: u8, quiet: u8) {
    let _ = FLAGS.set((verbose, quiet));
    let started = Instant::now();
    let mut builder = env_logger::Builder::new();
    builder.filter_level(LevelFilter::Warn);
    let filter = std::env::var(FILTER_VARIABLE).or_else(|_| std::env::var(RUST_FILTER_VARIABLE));
    if let Ok(filter) = filter {
        builder.parse_filters(&filter);
    }
    if let Some(level) = level(verbose, quiet) {
        builder.filter_level(level);
    }
    builder
        .target(env_logger::Target::Pipe(Box::new(crate::say::Pipe)))
        .write_style(env_logger::WriteStyle::Never)
        .format(move |out, record| {
            let message = record.args();
            match record.level() {
                Level::Error => writeln!(out, "lease: {message}"),
                Level::Warn => writeln!(out, "lease: warning: {message}"),
                Level::Info | Level::Debug | Level::Trace => writeln!(
                    out,
                    "lease: {:.3}s {} {}: {message}",
                    started.elapsed().as_secs_f64(),
                    record.level().as_str().to_lowercase(),
                    record.target()
                ),
            }
        });
    let _ = builder.try_init();
}

/// Whether `-q` asks for less than the default (more `-q` than `-v`): a skipped run then says
/// nothing.
pub fn quieted() -> bool {
    let (verbose, quiet) = FLAGS.get().copied().unwrap_or_default();
    quiet > verbose
}

/// The `-v` and `-q` flags this process was given, to pass on to a process of the tool's own.
pub fn flags() -> Vec<String> {
    let (verbose, quiet) = FLAGS.get().copied().unwrap_or_default();
    let mut flags = Vec::new();
    if verbose > 0 {
        flags.push(format!("-{}", "v".repeat(usize::from(verbose))));
    }
    if quiet > 0 {
        flags.push(format!("-{}", "q".repeat(usize::from(quiet))));
    }
    flags
}
