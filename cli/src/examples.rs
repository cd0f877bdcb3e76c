//! The examples each command's `--help` and manual page show, with what each does: one list
//! per command, and one for the tool as a whole.

/// What an example does, and its command line.
pub type Example = (&'static str, &'static str);

/// One job at a time, at most N at once, a leader with a value, a cron line, a latch.
const TOOL: &[Example] = &[
    (
        "One copy of a job at a time across hosts (another run waits for it)",
        "lease run nightly-backup -- /usr/local/bin/backup --full",
    ),
    (
        "At most 3 copies at once",
        "lease run --permits 3 exports -- ./export.sh",
    ),
    (
        "One scheduler leads at a time; `lease leader scheduler` shows its address",
        "lease run --value \"$(hostname):8080\" scheduler -- ./scheduler",
    ),
    (
        "A cron line: skipped quietly, and counted a success, while another host runs it",
        "*/5 * * * * lease -q run -n -E 0 sync -- /usr/local/bin/sync",
    ),
    (
        "Who holds it, and for how long",
        "lease status nightly-backup",
    ),
    (
        "A report that waits (at most 2 hours) for three loaders, each of which ends with \
         `lease latch nightly/loaded --down`",
        "lease latch nightly/loaded --count 3; lease latch nightly/loaded --wait 2h && ./report.sh",
    ),
    (
        "The lock in a PostgreSQL database instead, in its schema \"lease\" (the password in \
         $LEASE_REDIS_PASSWORD, or a file given by --password-file)",
        "lease --url postgres://app@db/orders run nightly-backup -- ./backup.sh",
    ),
];

const RUN: &[Example] = &[
    (
        "One copy of a job at a time across hosts, waiting at most 10 minutes for its turn",
        "lease run --wait 10m nightly-backup -- /usr/local/bin/backup --full",
    ),
    (
        "At most 3 copies at once",
        "lease run --permits 3 exports -- ./export.sh",
    ),
    (
        "Lead the election \"scheduler\" while the command runs, proclaiming its address",
        "lease run --value \"$(hostname):8080\" scheduler -- ./scheduler",
    ),
    (
        "A cron line: skipped quietly, and counted a success, while another host runs it",
        "*/5 * * * * lease -q run -n -E 0 sync -- /usr/local/bin/sync",
    ),
    (
        "At most 10 runs in any minute across hosts (no lock held); the 11th exits 75",
        "lease run --rate 10/1m partner-sync -- ./sync.sh",
    ),
    (
        "The same, waiting up to 5 minutes for a slot to free",
        "lease run --rate 10/1m --wait 5m partner-sync -- ./sync.sh",
    ),
    (
        "A shell command, stopped if it still holds the lock after 2 hours",
        "lease run --max-hold 2h nightly -c 'pg_dump app > /backups/app.sql'",
    ),
    (
        "On PostgreSQL through PgBouncer in transaction mode, waiters listening to the database \
         itself",
        "lease --url postgres://app@pgbouncer:6432/orders --pg-listen-url postgres://app@db/orders \
         run nightly -- ./nightly.sh",
    ),
];

const STATUS: &[Example] = &[
    (
        "Who holds a name, for how long, and its fencing tokens",
        "lease status nightly-backup",
    ),
    (
        "In a script: 0 when held, 1 when free",
        "if lease status nightly-backup > /dev/null; then echo running; fi",
    ),
    (
        "A semaphore's holders, and its permits held and free",
        "lease status --permits 3 exports",
    ),
    ("As one JSON object", "lease status --json nightly-backup"),
    (
        "A latch's count and when it lapses, or a rate limiter's grants and its next one",
        "lease status nightly/loaded",
    ),
];

const UNLOCK: &[Example] = &[
    (
        "Clear a holder that died without releasing",
        "lease unlock --force nightly-backup",
    ),
    (
        "Remove a semaphore, with every holder",
        "lease unlock --force --permits 3 exports",
    ),
];

const LEADER: &[Example] = &[
    (
        "Who leads, its term and value (exit 0), or that no one does (exit 1)",
        "lease leader scheduler",
    ),
    (
        "Each change, one JSON object a line, until interrupted",
        "lease leader --follow --json scheduler",
    ),
    (
        "Campaign, and lead while a command runs",
        "lease run --value \"$(hostname):8080\" scheduler -- ./scheduler",
    ),
];

const RESIZE: &[Example] = &[(
    "Let 5 runs hold \"exports\" at once; runs then declare --permits 5",
    "lease resize --permits 5 exports",
)];

const LATCH: &[Example] = &[
    (
        "Three loaders and a report across hosts: first, the count of loaders",
        "lease latch nightly/loaded --count 3",
    ),
    (
        "Each loader, when its load succeeded",
        "./load.sh shard-1 && lease latch nightly/loaded --down",
    ),
    (
        "The report, once all three are loaded (at most 2 hours from now)",
        "lease latch nightly/loaded --wait 2h && ./report.sh",
    ),
    (
        "A latch that lapses an hour after its last change instead of a day",
        "lease latch deploy/ready --count 2 --expire 1h",
    ),
    (
        "Its count, and when it lapses",
        "lease status nightly/loaded",
    ),
];

const COMPLETIONS: &[Example] = &[
    (
        "Install for bash",
        "lease completions bash > /etc/bash_completion.d/lease",
    ),
    (
        "Install for zsh, in a directory on $fpath",
        "lease completions zsh > \"${fpath[1]}/_lease\"",
    ),
    (
        "Install for fish",
        "lease completions fish > ~/.config/fish/completions/lease.fish",
    ),
];

const MAN: &[Example] = &[
    ("Read lease(1) now", "lease man | man -l -"),
    (
        "Install lease-run(1)",
        "lease man run > /usr/local/share/man/man1/lease-run.1",
    ),
];

/// The examples of `command` (of the tool as a whole, for `None`); none for a command that has
/// no list here, which the tests refuse.
pub fn of(command: Option<&str>) -> &'static [Example] {
    match command {
        None => TOOL,
        Some("run") => RUN,
        Some("status") => STATUS,
        Some("unlock") => UNLOCK,
        Some("leader") => LEADER,
        Some("resize") => RESIZE,
        Some("latch") => LATCH,
        Some("completions") => COMPLETIONS,
        Some("man") => MAN,
        Some(_) => &[],
    }
}
