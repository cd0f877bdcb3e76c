//! The tool's documentation, generated from its command-line definition so that it never
//! disagrees with it: `lease completions SHELL`, `lease man [COMMAND]`, and the tables (exit
//! codes, environment variables) that `--help` and the man pages both show.

use crate::say::out_bytes;
use crate::{examples, exit, help};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, CommandFactory};
use roff::{bold, roman, Roff};
use std::ffi::OsStr;
use std::process::ExitCode;

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell to complete for
    shell: clap_complete::Shell,
}

#[derive(Args)]
pub struct ManArgs {
    /// A command's own page (lease-run(1), ...) instead of lease(1)
    #[arg(value_parser = Page)]
    command: Option<String>,
}

/// The commands with a manual page of their own: every command a person types, read from the
/// command line's definition, so that a new command has its page.
pub fn pages() -> Vec<String> {
    crate::Cli::command()
        .get_subcommands()
        .filter(|command| !command.is_hide_set())
        .map(|command| command.get_name().to_owned())
        .collect()
}

/// A page's name, one of [`pages`]: read when the value is checked or listed (in the help,
/// the completions), never while the command line is defined, which it is part of.
#[derive(Clone)]
struct Page;

impl TypedValueParser for Page {
    type Value = String;

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        PossibleValuesParser::new(pages()).parse_ref(command, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(pages().into_iter().map(PossibleValue::new)))
    }
}

pub fn completions(args: CompletionsArgs) -> ExitCode {
    let mut command = crate::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "lease", &mut script);
    exit::printed(out_bytes(&script))
}

pub fn man(args: ManArgs) -> ExitCode {
    let mut command = crate::Cli::command().disable_help_subcommand(true);
    // Built, so that a command's page lists the options every command takes.
    command.build();
    let page = match &args.command {
        None => command,
        Some(name) => match command.find_subcommand(name) {
            Some(sub) => sub.clone().version(env!("CARGO_PKG_VERSION")),
            None => return ExitCode::from(exit::USAGE),
        },
    };
    let mut roff = Vec::new();
    if let Err(error) = render(page, args.command.as_deref(), &mut roff) {
        log::error!("cannot write the manual page: {error}");
        return ExitCode::from(exit::FAILED);
    }
    exit::printed(out_bytes(&roff))
}

/// The page of `command` (`name`, or lease(1) itself): clap's sections, then the tool's own
/// (exit status, environment, examples) where clap would put its help's free text: the same
/// lists as the help's.
fn render(
    command: clap::Command,
    name: Option<&str>,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let variables = variables(&command);
    let has_subcommands = command.get_subcommands().next().is_some();
    let man = clap_mangen::Man::new(command)
        .source(concat!("lease ", env!("CARGO_PKG_VERSION")))
        .manual("User Commands");
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    if has_subcommands {
        man.render_subcommands_section(out)?;
    }
    let mut roff = Roff::new();
    if help::has_exit_codes(name) {
        roff.control("SH", ["EXIT STATUS"]);
        for (code, meaning) in exit::codes(name) {
            entry(&mut roff, code, meaning);
        }
        roff.control("SH", ["ENVIRONMENT"]);
        for (variable, meaning) in &variables {
            entry(&mut roff, variable, meaning);
        }
        for (variable, meaning) in crate::VARIABLES {
            entry(&mut roff, variable, meaning);
        }
    }
    if name == Some("run") {
        roff.control("SH", ["THE COMMAND'S ENVIRONMENT"]);
        roff.text([roman(crate::run::command_environment())]);
        for (variable, meaning) in crate::run::COMMAND_ENVIRONMENT {
            entry(&mut roff, variable, meaning);
        }
    }
    roff.control("SH", ["EXAMPLES"]);
    for (what, line) in examples::of(name) {
        roff.control("PP", []);
        roff.text([roman(format!("{what}:"))]);
        roff.control("RS", ["4"]);
        roff.control("nf", []);
        roff.text([bold(*line)]);
        roff.control("fi", []);
        roff.control("RE", []);
    }
    roff.to_writer(out)?;
    man.render_version_section(out)
}

/// One tagged paragraph: `name` in bold, `text` below it.
fn entry(roff: &mut Roff, name: &str, text: &str) {
    roff.control("TP", []);
    roff.text([bold(name)]);
    roff.text([roman(text)]);
}

/// Each option's variable, and the option it stands for.
fn variables(command: &clap::Command) -> Vec<(String, String)> {
    command
        .get_arguments()
        .filter_map(|arg| {
            let variable = arg.get_env()?.to_string_lossy().into_owned();
            let option = arg.get_long()?;
            Some((variable, format!("as --{option}")))
        })
        .collect()
}
