//! The `lease` tool keeps the conventions of its kind (flock(1), `consul lock`, `etcdctl lock`,
//! redis-cli): `--version`, clap's own usage errors, shell completions and man pages, settings
//! from flags, then `LEASE_*` variables, then `REDIS_URL`, then defaults; a log filtered by
//! `LEASE_LOG`, `-v` and `-q` on stderr, machine output alone on stdout; no secret in any help.

mod support;
mod tool;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{client, RedisServer};
use tool::{bare, closed_port, lease, man_page, output, stderr_of, stdout_of};

const USAGE: i32 = 64;
const UNAVAILABLE: i32 = 69;

#[test]
fn the_version_is_the_crate_s() {
    for flag in ["--version", "-V"] {
        let done = output(bare().arg(flag));
        assert_eq!(done.status.code(), Some(0), "{done:?}");
        assert_eq!(
            stdout_of(&done),
            format!("lease {}\n", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn no_arguments_print_the_usage_and_the_commands_with_the_usage_code() {
    // The same with a server in the environment, as a user of the tool has it.
    let configured = output(&mut lease("redis://127.0.0.1:6379"));
    let done = output(&mut bare());
    assert_eq!(stderr_of(&configured), stderr_of(&done));
    assert_eq!(configured.status.code(), Some(USAGE), "{configured:?}");
    assert_eq!(done.status.code(), Some(USAGE), "{done:?}");
    assert!(done.stdout.is_empty(), "{done:?}");
    let stderr = stderr_of(&done);
    assert!(
        stderr.contains("Usage: lease [OPTIONS] <COMMAND>"),
        "{stderr}"
    );
    for command in ["run", "status", "unlock", "completions", "man"] {
        assert!(
            stderr
                .lines()
                .any(|line| line.trim_start().starts_with(command)),
            "{command} is not listed:\n{stderr}"
        );
    }
    assert!(!stderr.starts_with("lease: "), "{stderr}");
    assert!(stderr.ends_with('\n'), "{stderr:?}");
}

#[test]
fn command_line_mistakes_get_clap_s_message_with_the_usage_and_the_usage_code() {
    let cases: [(&[&str], &str, &str); 5] = [
        (
            &["run", "job", "true"],
            "error: unexpected argument 'true' found",
            "Usage: lease run [OPTIONS] <NAME> [-- <CMD>...]",
        ),
        (
            &["run", "--wiat", "5s", "job", "--", "true"],
            "tip: a similar argument exists: '--wait'",
            "Usage: lease run",
        ),
        (
            &["--lease", "5x", "run", "job", "--", "true"],
            "invalid value '5x' for '--lease <DURATION>'",
            "Usage: lease",
        ),
        (
            &["run", "job"],
            "the following required arguments were not provided",
            "Usage: lease run <NAME> -- <CMD>...",
        ),
        (
            &["frobnicate"],
            "error: unrecognized subcommand 'frobnicate'",
            "Usage: lease [OPTIONS] <COMMAND>",
        ),
    ];
    for (args, message, usage) in cases {
        let done = output(bare().args(args));
        let stderr = stderr_of(&done);
        assert_eq!(done.status.code(), Some(USAGE), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(stderr.contains(usage), "{args:?}: {stderr}");
        assert!(
            stderr.contains("For more information, try '--help'."),
            "{args:?}: {stderr}"
        );
        assert!(done.stdout.is_empty(), "{args:?}: {done:?}");
    }
}

#[test]
fn completions_name_every_command_and_option_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let done = output(bare().args(["completions", shell]));
        assert_eq!(done.status.code(), Some(0), "{shell}: {done:?}");
        let script = stdout_of(&done);
        // fish names an option without its dashes.
        for word in [
            "run",
            "status",
            "unlock",
            "wait",
            "kill-grace",
            "url",
            "owner",
        ] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
        for helper in ["__exec", "__keeper"] {
            assert!(!script.contains(helper), "{shell}: offers {helper}");
        }
    }
    // bash takes the script, and completes `lease` with it.
    let mut bash = Command::new("bash")
        .args(["--norc", "-c", "source /dev/stdin && complete -p lease"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("bash");
    let script = output(bare().args(["completions", "bash"])).stdout;
    bash.stdin
        .take()
        .expect("stdin")
        .write_all(&script)
        .expect("feed bash");
    let loaded = bash.wait_with_output().expect("bash ran");
    assert!(loaded.status.success(), "{loaded:?}");
    assert!(stdout_of(&loaded).contains("_lease lease"), "{loaded:?}");

    let unknown = output(bare().args(["completions", "tcsh"]));
    assert_eq!(unknown.status.code(), Some(USAGE), "{unknown:?}");
}

#[test]
fn the_man_pages_are_roff_and_name_the_commands_options_variables_and_exit_codes() {
    let page = man_page(&["man"]);
    assert!(page.contains(".TH lease 1 "), "{page}");
    for section in [
        "NAME",
        "SYNOPSIS",
        "OPTIONS",
        "SUBCOMMANDS",
        "\"EXIT STATUS\"",
        "ENVIRONMENT",
    ] {
        assert!(page.contains(&format!(".SH {section}\n")), "no {section}");
    }
    for word in [
        "lease\\-run(1)",
        "lease\\-status(1)",
        "lease\\-unlock(1)",
        "LEASE_REDIS_URL",
        "LEASE_REDIS_PASSWORD",
        "REDIS_URL",
        "LEASE_LOG",
        "LEASE_LEASE",
        "\\-\\-url",
        "79",
    ] {
        assert!(page.contains(word), "no {word} in lease(1)");
    }
    assert!(!page.contains("__exec") && !page.contains("__keeper"));

    let run = man_page(&["man", "run"]);
    assert!(run.contains(".TH lease-run 1 "), "{run}");
    assert!(run.contains(".SH \"THE COMMAND'S ENVIRONMENT\"\n"), "{run}");
    for word in [
        "\\-\\-wait",
        "\\-\\-owner",
        "LEASE_TOKEN",
        "LEASE_OWNER",
        "\\-\\-url",
    ] {
        assert!(run.contains(word), "no {word} in lease-run(1)");
    }
    for command in ["status", "unlock", "completions", "man"] {
        let page = man_page(&["man", command]);
        assert!(page.contains(&format!(".TH lease-{command} 1 ")), "{page}");
    }
    let unknown = output(bare().args(["man", "frobnicate"]));
    assert_eq!(unknown.status.code(), Some(USAGE), "{unknown:?}");
}

#[test]
fn no_help_page_or_generated_file_shows_a_secret() {
    let secret = "hunter2";
    let (_dir, password_file) = tool::scratch("hunter2");
    let with_secrets = |command: &mut Command| {
        command
            .env("LEASE_REDIS_URL", format!("redis://:{secret}@127.0.0.1:1"))
            .env("REDIS_URL", format!("redis://:{secret}@127.0.0.1:2"))
            .env("LEASE_REDIS_PASSWORD", secret)
            .env("LEASE_PASSWORD_FILE", &password_file)
            .env("LEASE_PREFIX", secret)
            .env("LEASE_LOG", "debug");
    };
    let cases: [&[&str]; 13] = [
        &[],
        &["--help"],
        &["-h"],
        &["run", "--help"],
        &["status", "--help"],
        &["unlock", "--help"],
        &["help", "run"],
        &["man"],
        &["man", "run"],
        &["completions", "bash"],
        &["completions", "zsh"],
        &["run", "job", "true"],
        &["--lease", "5x", "status", "x"],
    ];
    for args in cases {
        let mut command = bare();
        with_secrets(&mut command);
        let done = output(command.args(args));
        let (stdout, stderr) = (stdout_of(&done), stderr_of(&done));
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{args:?} shows the secret:\n{stdout}\n{stderr}"
        );
    }
    let mut command = bare();
    with_secrets(&mut command);
    let help = stdout_of(&output(command.arg("--help")));
    for variable in ["LEASE_REDIS_URL", "LEASE_REDIS_PASSWORD", "REDIS_URL"] {
        assert!(help.contains(variable), "{variable} is not named:\n{help}");
    }
}

/// The server `lease -v status x` reports it tried, and where that came from.
fn server_tried(command: &mut Command) -> String {
    let done = output(command.args(["-v", "--connect-timeout", "300ms", "status", "x"]));
    let stderr = stderr_of(&done);
    stderr
        .lines()
        .find_map(|line| {
            line.split_once("lease::connect: server ")
                .map(|(_, rest)| rest)
        })
        .unwrap_or_else(|| panic!("no server line:\n{stderr}"))
        .to_owned()
}

#[test]
fn the_server_comes_from_the_flag_then_lease_redis_url_then_redis_url_then_the_default() {
    let [a, b, c] = [closed_port(), closed_port(), closed_port()]
        .map(|port| format!("redis://127.0.0.1:{port}"));
    let all = || {
        let mut command = bare();
        command.env("LEASE_REDIS_URL", &b).env("REDIS_URL", &c);
        command
    };
    assert_eq!(
        server_tried(all().args(["--url", &a])),
        format!("{a} (from --url)")
    );
    assert_eq!(
        server_tried(&mut all()),
        format!("{b} (from $LEASE_REDIS_URL)")
    );
    assert_eq!(
        server_tried(bare().env("REDIS_URL", &c)),
        format!("{c} (from $REDIS_URL)")
    );
    assert_eq!(
        server_tried(&mut bare()),
        "redis://127.0.0.1:6379 (from the default)"
    );
    // The failure names the server the settings chose.
    let done = output(all().args(["--url", &a, "status", "x"]));
    assert_eq!(done.status.code(), Some(UNAVAILABLE), "{done:?}");
    assert!(
        stderr_of(&done).starts_with(&format!("lease: redis unavailable at {a}: ")),
        "{done:?}"
    );
    // And REDIS_URL alone reaches a live server.
    let server = RedisServer::start();
    let done = output(bare().env("REDIS_URL", server.url()).args(["status", "x"]));
    assert_eq!(done.status.code(), Some(1), "free: {done:?}");
}

#[test]
fn other_settings_come_from_the_flag_then_their_variable_then_the_default() {
    let server = RedisServer::start();
    let url = server.url();
    let prefixed = redis_lease::Client::builder(url.as_str())
        .key_prefix("app1")
        .build()
        .expect("valid settings");
    let _held = prefixed
        .lock("job")
        .expect("valid name")
        .with_lease(Duration::from_secs(30))
        .lock()
        .expect("free");
    let held = |command: &mut Command| {
        let done = output(command.args(["status", "--json", "job"]));
        let status: serde_json::Value = serde_json::from_slice(&done.stdout).expect("JSON");
        let held = status["held"] == true;
        assert_eq!(
            done.status.code(),
            Some(if held { 0 } else { 1 }),
            "{done:?}"
        );
        held
    };
    assert!(held(lease(&url).env("LEASE_PREFIX", "app1")));
    assert!(!held(
        lease(&url)
            .env("LEASE_PREFIX", "app1")
            .args(["--prefix", "app2"])
    ));
    assert!(!held(&mut lease(&url)));

    // The lease a command holds, as `status` sees it from inside the command.
    let tool = env!("CARGO_BIN_EXE_lease");
    let ttl_inside = |command: &mut Command| {
        let done = output(command.args([
            "run",
            "leased",
            "--",
            "sh",
            "-c",
            &format!("{tool} --url {url} status --json leased"),
        ]));
        assert_eq!(done.status.code(), Some(0), "{done:?}");
        let status: serde_json::Value = serde_json::from_slice(&done.stdout).expect("JSON");
        status["ttl_ms"].as_u64().expect("a ttl")
    };
    assert!(ttl_inside(lease(&url).env("LEASE_LEASE", "1500ms")) <= 1500);
    assert!(
        ttl_inside(
            lease(&url)
                .env("LEASE_LEASE", "1500ms")
                .args(["--lease", "20s"])
        ) > 1500
    );
    assert!(ttl_inside(&mut lease(&url)) > 20_000, "the default is 30s");

    let bad = output(lease(&url).env("LEASE_LEASE", "5x").args(["status", "x"]));
    assert_eq!(bad.status.code(), Some(USAGE), "{bad:?}");
    assert!(stderr_of(&bad).contains("'--lease <DURATION>'"), "{bad:?}");
    let overridden = output(
        lease(&url)
            .env("LEASE_LEASE", "5x")
            .args(["--lease", "2s", "status", "x"]),
    );
    assert_eq!(overridden.status.code(), Some(1), "free: {overridden:?}");

    // Switches from the environment: falsy words are off, and a flag beats the other's variable.
    let off = output(
        lease(&url)
            .env("LEASE_CLUSTER", "false")
            .args(["status", "x"]),
    );
    assert_eq!(off.status.code(), Some(1), "free: {off:?}");
    let both = output(
        lease(&url)
            .env("LEASE_CLUSTER", "1")
            .env("LEASE_REDLOCK", "1")
            .args(["status", "x"]),
    );
    assert_eq!(both.status.code(), Some(USAGE), "{both:?}");
    let flag_wins =
        output(
            lease(&url)
                .env("LEASE_CLUSTER", "1")
                .args(["-v", "--redlock", "status", "x"]),
        );
    assert!(
        stderr_of(&flag_wins).contains("RedLock masters"),
        "{flag_wins:?}"
    );
    assert!(!client(&server)
        .lock("leased")
        .expect("valid")
        .is_locked()
        .expect("reachable"));
}

#[test]
fn logs_go_to_stderr_filtered_by_lease_log_and_by_v_and_q_and_json_alone_to_stdout() {
    let server = RedisServer::start();
    let url = server.url();
    let verbose = output(lease(&url).args(["-v", "status", "--json", "x"]));
    assert_eq!(verbose.status.code(), Some(1), "free: {verbose:?}");
    let _: serde_json::Value = serde_json::from_slice(&verbose.stdout).expect("stdout is JSON");
    let stderr = stderr_of(&verbose);
    assert!(stderr.contains(" debug lease::"), "{stderr}");
    assert!(
        stderr.lines().all(|line| line.starts_with("lease: ")),
        "{stderr}"
    );
    let from_env = output(lease(&url).env("LEASE_LOG", "debug").args(["status", "x"]));
    assert!(
        stderr_of(&from_env).contains(" debug lease::"),
        "{from_env:?}"
    );
    let plain = output(lease(&url).args(["status", "x"]));
    assert_eq!(
        stderr_of(&plain),
        "",
        "nothing to say by default: {plain:?}"
    );

    // An unreachable server: the failure line, unless -qq; the same exit code whatever is said.
    let unreachable = format!("redis://127.0.0.1:{}", closed_port());
    let lines = |flags: &[&str], filter: Option<&str>| {
        let mut command = lease(&unreachable);
        if let Some(filter) = filter {
            command.env("LEASE_LOG", filter);
        }
        let done = output(command.args(flags).args(["status", "x"]));
        assert_eq!(done.status.code(), Some(UNAVAILABLE), "{flags:?}: {done:?}");
        stderr_of(&done).lines().count()
    };
    assert_eq!(lines(&[], None), 1);
    assert_eq!(lines(&["-q"], None), 1);
    assert_eq!(lines(&["-qq"], None), 0);
    assert_eq!(lines(&[], Some("off")), 0);
    assert_eq!(lines(&["-q"], Some("debug")), 1, "-q overrides LEASE_LOG");
    assert_eq!(
        lines(&[], Some("lease::connect=debug")),
        2,
        "one module's debug records, and the failure"
    );
    assert!(lines(&["-v"], None) > 1);
}

#[test]
fn a_url_without_a_scheme_is_a_usage_error_that_says_how_to_write_one() {
    let done = output(bare().args(["--url", "localhost:6379", "status", "x"]));
    assert_eq!(done.status.code(), Some(USAGE), "{}", stderr_of(&done));
    let said = stderr_of(&done);
    assert!(said.contains("redis://host:port"), "{said}");

    // A socket URL with a single slash is a URL: it is tried, and the password never shown.
    let server = RedisServer::start();
    let url = format!("unix:{}?pass=hunter2", server.unix_socket().display());
    let done = output(bare().args(["--url", &url, "status", "x"]));
    let said = format!("{}{}", stderr_of(&done), stdout_of(&done));
    assert_ne!(done.status.code(), Some(USAGE), "{said}");
    assert!(!said.contains("hunter2"), "{said}");
}
