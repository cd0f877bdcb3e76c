//! Every command a person types has a manual page and examples, in its `--help` and its page,
//! whatever commands are added; each help words the flags for what its command does.

mod tool;

use tool::{bare, man_page, output, stdout_of};

/// The commands `lease --help` lists, but `help`.
fn commands() -> Vec<String> {
    let help = stdout_of(&output(bare().arg("--help")));
    let listed = help
        .split_once("Commands:\n")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no commands in:\n{help}"));
    listed
        .lines()
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|command| *command != "help")
        .map(str::to_owned)
        .collect()
}

/// The command lines of the `Examples:` section of a help.
fn examples(help: &str) -> Vec<String> {
    let Some((_, section)) = help.split_once("\nExamples:\n") else {
        return Vec::new();
    };
    section
        .lines()
        .take_while(|line| line.starts_with("  "))
        .filter(|line| line.starts_with("    "))
        .map(|line| line.trim().to_owned())
        .collect()
}

#[test]
fn every_command_has_a_manual_page_with_examples() {
    let commands = commands();
    for command in [
        "run",
        "status",
        "unlock",
        "leader",
        "resize",
        "latch",
        "completions",
        "man",
    ] {
        assert!(
            commands.iter().any(|listed| listed == command),
            "{command} not in {commands:?}"
        );
    }
    let page = man_page(&["man"]);
    assert!(page.contains(".SH EXAMPLES\n"), "lease(1) has no examples");
    for command in &commands {
        let page = man_page(&["man", command]);
        assert!(page.contains(&format!(".TH lease-{command} 1 ")), "{page}");
        let examples = page
            .split_once(".SH EXAMPLES\n")
            .map(|(_, rest)| rest)
            .unwrap_or_else(|| panic!("lease-{command}(1) has no examples"));
        assert!(
            examples.contains("\\fBlease"),
            "lease-{command}(1) shows no command line: {examples}"
        );
    }
    let lease_1 = man_page(&["man"]);
    for command in &commands {
        assert!(
            lease_1.contains(&format!("lease\\-{command}(1)")),
            "lease(1) names no lease-{command}(1)"
        );
    }
}

#[test]
fn every_help_has_examples_of_its_command() {
    let top = stdout_of(&output(bare().arg("--help")));
    let lines = examples(&top);
    for shown in [
        "lease run ",
        "--permits 3",
        "--value ",
        "lease -q run -n -E 0 ",
    ] {
        assert!(
            lines.iter().any(|line| line.contains(shown)),
            "no {shown:?} among lease's examples: {lines:?}"
        );
    }
    for command in commands() {
        let help = stdout_of(&output(bare().args([command.as_str(), "--help"])));
        let lines = examples(&help);
        assert!(
            lines
                .iter()
                .any(|line| line.contains(&format!("lease {command} "))
                    || line.contains(&format!(" {command} "))),
            "lease {command} --help has no example of it: {lines:?}\n{help}"
        );
    }
}

#[test]
fn each_help_words_the_flags_for_its_own_command() {
    let run = stdout_of(&output(bare().args(["run", "--help"])));
    assert!(run.contains("hold one of them"), "{run}");
    for other in ["lease status:", "lease leader:", "status shows"] {
        assert!(!run.contains(other), "run --help shows {other:?}:\n{run}");
    }
    for command in ["status", "unlock"] {
        let help = stdout_of(&output(bare().args([command, "--help"])));
        let (own, _) = help
            .split_once("Connection options")
            .unwrap_or_else(|| panic!("no connection options in:\n{help}"));
        for verb in ["hold one of them", "take its", "holders take turns"] {
            assert!(
                !own.contains(verb),
                "{command} --help says {verb:?}:\n{own}"
            );
        }
        for flag in ["--permits", "--read", "--write", "--fair"] {
            assert!(own.contains(flag), "{command} --help lacks {flag}:\n{own}");
        }
    }
}
