//! What each command's `--help` shows after its options: its examples, what it reads from the
//! environment, and its exit codes; the man pages show the same lists (see `manual`).

use crate::{examples, exit, layout, run};

/// The sections after the options in the help of `command` (of `lease` itself, for `None`):
/// examples, then `lease run`'s command environment or `lease`'s variables, then the exit
/// codes of a command that talks to the store.
pub fn after_help(command: Option<&str>) -> String {
    let mut sections = vec![layout::examples(examples::of(command))];
    match command {
        None => sections.push(layout::table(
            "Environment (besides the options' own variables, shown beside them)",
            &crate::VARIABLES,
        )),
        Some("run") => sections.push(format!(
            "{}\n{}",
            layout::wrap(&run::command_environment(), layout::WIDTH).join("\n"),
            layout::columns(&run::COMMAND_ENVIRONMENT)
        )),
        Some(_) => {}
    }
    if has_exit_codes(command) {
        sections.push(layout::table("Exit codes", &exit::codes(command)));
    }
    sections.join("\n\n")
}

/// Whether `command` has exit codes to tell: every command but those that only print the
/// tool's own documentation.
pub fn has_exit_codes(command: Option<&str>) -> bool {
    !matches!(command, Some("completions" | "man"))
}
