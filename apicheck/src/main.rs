//! `apicheck`: the public API of each published library crate, listed one item a line as
//! `cargo public-api` lists it (blanket and auto-trait impls left out), against the listing
//! committed beside the crate (`<crate>/public-api.txt`). A change to a public surface then shows
//! in review as a change to that file.
//!
//! ```text
//! cargo run -p apicheck            # fails, with the difference, if a listing is out of date
//! cargo run -p apicheck -- write   # writes the listings anew
//! ```
//!
//! rustdoc's JSON output is unstable: it is asked of the stable toolchain with
//! `RUSTC_BOOTSTRAP=1`, set for rustdoc's build alone, in a target directory of its own.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The published library crates: their folder and package.
const CRATES: [(&str, &str); 5] = [
    ("wheel", "hashwheel"),
    ("net", "deadline-net"),
    ("zookeeper", "zookeeper-blocking"),
    ("postgres", "postgres-blocking"),
    ("lease", "redis-lease"),
];

/// Where the listing of the crate in `folder` is kept.
fn listing_path(root: &Path, folder: &str) -> PathBuf {
    root.join(folder).join("public-api.txt")
}

/// The public API of `package`, every feature on, one item a line.
fn listing(root: &Path, folder: &str, package: &str) -> Result<String, String> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("apicheck");
    let json = rustdoc_json::Builder::default()
        .clear_toolchain()
        .env("RUSTC_BOOTSTRAP", "1")
        .manifest_path(root.join(folder).join("Cargo.toml"))
        .all_features(true)
        .target_dir(target)
        .quiet(true)
        .build()
        .map_err(|error| format!("{package}: rustdoc's JSON: {error}"))?;
    let api = public_api::Builder::from_rustdoc_json(json)
        .omit_blanket_impls(true)
        .omit_auto_trait_impls(true)
        .build()
        .map_err(|error| format!("{package}: reading rustdoc's JSON: {error}"))?;
    // Sorted: the listing does not change when items only move between files or blocks.
    let mut lines: Vec<String> = api.items().map(|item| format!("{item}\n")).collect();
    lines.sort();
    Ok(lines.concat())
}

/// The lines of `now` that `then` lacks, as `+`, and those it has and `now` lacks, as `-`.
fn difference(then: &str, now: &str) -> String {
    let (then_lines, now_lines): (Vec<&str>, Vec<&str>) =
        (then.lines().collect(), now.lines().collect());
    let gone = then_lines.iter().filter(|line| !now_lines.contains(line));
    let new = now_lines.iter().filter(|line| !then_lines.contains(line));
    gone.map(|line| format!("- {line}\n"))
        .chain(new.map(|line| format!("+ {line}\n")))
        .collect()
}

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let write = std::env::args().nth(1).is_some_and(|verb| verb == "write");
    let mut stale = 0;
    for (folder, package) in CRATES {
        let now = match listing(&root, folder, package) {
            Ok(now) => now,
            Err(error) => {
                log_line(&error);
                return ExitCode::from(2);
            }
        };
        let path = listing_path(&root, folder);
        if write {
            if let Err(error) = std::fs::write(&path, &now) {
                log_line(&format!("{}: {error}", path.display()));
                return ExitCode::from(2);
            }
            continue;
        }
        let then = std::fs::read_to_string(&path).unwrap_or_default();
        if then != now {
            stale += 1;
            log_line(&format!(
                "the public API of {package} is not {}'s:\n{}",
                path.display(),
                difference(&then, &now)
            ));
        }
    }
    if stale > 0 {
        log_line(
            "if the change is meant, `cargo run -p apicheck -- write` and commit the listings",
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// One line on stderr, for the person running the check.
#[allow(clippy::print_stderr)]
fn log_line(text: &str) {
    eprintln!("apicheck: {text}");
}
