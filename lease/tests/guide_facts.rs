//! The guide's lists that the code can keep true: a row in the errors' table for every variant of
//! `Error`, and a row in the examples' table for every example of the crate.

use std::fs;
use std::path::Path;

fn crate_file(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The variants of `pub enum Error`, read from its source.
fn error_variants() -> Vec<String> {
    let source = crate_file("src/error.rs");
    let body = source
        .split_once("pub enum Error {")
        .expect("the enum")
        .1
        .split_once("\n}")
        .expect("its end")
        .0;
    body.lines()
        .filter_map(|line| line.strip_prefix("    "))
        .filter(|line| line.starts_with(|c: char| c.is_ascii_uppercase()))
        .map(|line| {
            line.split(|c: char| !c.is_ascii_alphanumeric())
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn every_error_variant_has_a_row_in_the_guide() {
    let guide = crate_file("guide/library.md");
    let variants = error_variants();
    assert!(variants.len() >= 10, "{variants:?}");
    let missing: Vec<&String> = variants
        .iter()
        .filter(|variant| {
            !guide.lines().any(|line| {
                line.strip_prefix("| `")
                    .and_then(|rest| rest.strip_prefix(variant.as_str()))
                    .is_some_and(|rest| rest.starts_with([' ', '(', '`']))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "no row in the errors' table for {missing:?}"
    );
}

#[test]
fn every_example_is_named_in_the_guide() {
    let guide = crate_file("guide/library.md");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut names = Vec::new();
    for entry in fs::read_dir(&examples).expect("the examples") {
        let path = entry.expect("an entry").path();
        let name = if path.is_dir() {
            path.file_name()
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            path.file_stem()
        } else {
            continue;
        };
        names.push(name.expect("a name").to_string_lossy().into_owned());
    }
    assert!(!names.is_empty());
    let missing: Vec<&String> = names
        .iter()
        .filter(|name| !guide.contains(&format!("| `{name}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "examples not in the guide's table: {missing:?}"
    );
}
