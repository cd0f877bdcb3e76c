//! Every command a person types has a manual page, whatever commands are added.

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

#[test]
fn every_command_has_a_manual_page() {
    let commands = commands();
    for command in [
        "run",
        "status",
        "unlock",
        "leader",
        "resize",
        "completions",
        "man",
    ] {
        assert!(
            commands.iter().any(|listed| listed == command),
            "{command} not in {commands:?}"
        );
    }
    let lease_1 = man_page(&["man"]);
    for command in &commands {
        let page = man_page(&["man", command]);
        assert!(page.contains(&format!(".TH lease-{command} 1 ")), "{page}");
        assert!(
            lease_1.contains(&format!("lease\\-{command}(1)")),
            "lease(1) names no lease-{command}(1)"
        );
    }
}
