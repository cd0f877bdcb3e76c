//! Whether any script call touched a hold that was not the one it named, read from the lock
//! server's own log of what it ran (`MONITOR`, which lists the commands a Lua script runs after
//! the call that ran it).
//!
//! Every call of `lease`'s scripts names the hold it acts for: a release and a renewal name it in
//! their arguments, a re-entry names the hold it re-enters, and a new hold is named by the
//! `hset ... :hold ID` that makes it. The replay keeps, for the lock key, which hold holds it and
//! until when: a hold begins at that `hset`, ends at a `del` or an expiry, and its end is set by
//! every `pexpire`. Each write a script makes to the key is then checked:
//!
//! - `hset KEY OWNER 1 :hold ID ...` (a take, or a grant after a release) needs the key free;
//! - every other write (`hincrby`, `hset KEY :a:ID 1`, `hdel`, `pexpire`, `del`) needs the hold
//!   the call named to hold the key.
//!
//! Expiry is read from the server's clock in the log, so a write within [`SLACK`] of the hold's
//! end is given the benefit of the doubt either way. Redis stops time for a script: a key that
//! was alive when the script began stays alive until it ends, however long it runs (a server
//! frozen in the middle of a script finishes it after the resume). So a script's writes to the
//! hold it names are judged at the time its call was logged, and a new hold at the time of its
//! own write: between those two stamps lies the moment the server read its clock for the script.

use std::collections::VecDeque;
use std::sync::LazyLock;
use testkit::Monitored;

/// How close to a hold's end (in µs) a write may be without being judged: Redis decides expiry to
/// the millisecond, at the start of a script, while the log stamps each command as it runs.
pub const SLACK: u64 = 5_000;

/// The SHA1 of each of `lease`'s scripts, as its calls name them: (acquire, release, renew,
/// lock, unlock). The first three carry the shared functions before their own text; `lock.lua`
/// and `unlock.lua` (the common acquisition and release) only their own.
static SHAS: LazyLock<[String; 5]> = LazyLock::new(|| {
    let access = include_str!("../../lease/src/stores/redis/scripts/access.lua");
    let checks = include_str!("../../lease/src/stores/redis/scripts/checks.lua");
    let holds = include_str!("../../lease/src/stores/redis/scripts/holds.lua");
    let hash = |text: &str| redis::Script::new(text).get_hash().to_owned();
    let sha = |script: &str| hash(&[access, checks, holds, script].concat());
    [
        sha(include_str!(
            "../../lease/src/stores/redis/scripts/acquire.lua"
        )),
        sha(include_str!(
            "../../lease/src/stores/redis/scripts/release.lua"
        )),
        sha(include_str!(
            "../../lease/src/stores/redis/scripts/renew.lua"
        )),
        hash(include_str!(
            "../../lease/src/stores/redis/scripts/lock.lua"
        )),
        hash(include_str!(
            "../../lease/src/stores/redis/scripts/unlock.lua"
        )),
    ]
});

/// What the replay found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touches {
    /// Writes to the lock key by scripts that were checked.
    pub checked: usize,
    /// Writes to a lease held by another hold (or to a lease that had ended).
    pub foreign: usize,
    /// The first of them, as the log shows it, to replay by hand.
    pub first: Option<String>,
}

impl Touches {
    /// What two logs found together (RedLock's masters each have one).
    pub fn and(self, other: Touches) -> Touches {
        Touches {
            checked: self.checked + other.checked,
            foreign: self.foreign + other.foreign,
            first: self.first.or(other.first),
        }
    }
}

#[derive(Default)]
struct Hold {
    id: Option<String>,
    /// When the hold ends, in µs of the server's clock (`None`: no TTL seen yet).
    until: Option<u64>,
}

impl Hold {
    fn surely_over(&self, at: u64) -> bool {
        self.until.is_some_and(|until| at >= until + SLACK)
    }
    fn maybe_over(&self, at: u64) -> bool {
        self.until.is_some_and(|until| at + SLACK >= until)
    }
    fn held_by(&self, id: Option<&str>, at: u64) -> bool {
        id.is_some() && self.id.as_deref() == id && !self.surely_over(at)
    }
    fn free(&self, at: u64) -> bool {
        self.id.is_none() || self.maybe_over(at)
    }
}

/// The holds a script call names for `key`, from the call's own arguments, in order: one for an
/// acquisition (the hold it may re-enter) or a release, one per occurrence of the key for a
/// renewal (a process may renew a hold it has not yet heard was lost beside its new hold of the
/// same key, in one call).
fn named(args: &[&str], key: &str) -> VecDeque<Option<String>> {
    let mut holds = VecDeque::new();
    let [_, sha, count, rest @ ..] = args else {
        return holds;
    };
    let Ok(count) = count.parse::<usize>() else {
        return holds;
    };
    if rest.len() < count {
        return holds;
    }
    let (keys, argv) = rest.split_at(count);
    let [acquire, release, renew, lock, unlock] = &*SHAS;
    let hold = |index: usize| {
        argv.get(index)
            .filter(|hold| !hold.is_empty())
            .map(|hold| hold.to_string())
    };
    // The common acquisition and release lay out their first arguments as the general ones do.
    if (sha == acquire || sha == lock) && keys.first() == Some(&key) {
        holds.push_back(hold(3));
    } else if (sha == release || sha == unlock) && keys.first() == Some(&key) {
        holds.push_back(hold(1));
    } else if sha == renew {
        for (index, _) in keys.iter().enumerate().filter(|(_, k)| **k == key) {
            holds.push_back(hold(2 * index));
        }
    }
    holds
}

/// Replays `log` for the lock key `key`.
pub fn check(log: &[Monitored], key: &str) -> Touches {
    let mut touches = Touches::default();
    let mut hold = Hold::default();
    // The hold the running script acts for on the key, and the ones it names next (a renewal
    // of several leases looks each up with `hget KEY :hold`, in order).
    let mut caller: Option<String> = None;
    let mut next: VecDeque<Option<String>> = VecDeque::new();
    // When the running script's call was logged.
    let mut called = 0;
    for command in log {
        let at = command.at_micros;
        let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
        if !command.from_script {
            called = at;
            next = match args.first() {
                Some(&"evalsha") => named(&args, key),
                _ => VecDeque::new(),
            };
            caller = next.pop_front().flatten();
            // Faults and tools act on the key directly: a TTL cut, a forced delete.
            match args.as_slice() {
                ["pexpire", k, millis] if *k == key => {
                    hold.until = millis.parse::<u64>().ok().map(|ms| at + ms * 1000);
                }
                ["del", k, ..] if *k == key => hold = Hold::default(),
                _ => {}
            }
            continue;
        }
        let fine = match args.as_slice() {
            ["hget", k, ":hold"] if *k == key => {
                if let Some(named) = next.pop_front() {
                    caller = named;
                }
                continue;
            }
            ["hset", k, _owner, "1", ":hold", id, ..] if *k == key => {
                let fine = hold.free(at);
                caller = Some((*id).to_owned());
                hold = Hold {
                    id: caller.clone(),
                    until: None,
                };
                fine
            }
            ["hset" | "hincrby" | "hdel", k, ..] if *k == key => {
                hold.held_by(caller.as_deref(), called)
            }
            ["pexpire", k, millis] if *k == key => {
                let fine = hold.held_by(caller.as_deref(), called);
                hold.until = millis.parse::<u64>().ok().map(|ms| at + ms * 1000);
                fine
            }
            ["del", k] if *k == key => {
                let fine = hold.held_by(caller.as_deref(), called);
                hold = Hold::default();
                fine
            }
            _ => continue,
        };
        touches.checked += 1;
        if !fine {
            touches.foreign += 1;
            touches.first.get_or_insert_with(|| {
                format!(
                    "{} at {at} µs, in a script called at {called} µs",
                    command.args.join(" ")
                )
            });
        }
    }
    touches
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "{jobs}";

    fn client(at: u64, args: &[&str]) -> Monitored {
        Monitored {
            at_micros: at,
            from_script: false,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    fn script(at: u64, args: &[&str]) -> Monitored {
        Monitored {
            from_script: true,
            ..client(at, args)
        }
    }

    fn call(at: u64, sha: usize, keys: &[&str], argv: &[&str]) -> Monitored {
        let count = keys.len().to_string();
        let mut args = vec!["evalsha", SHAS[sha].as_str(), count.as_str()];
        args.extend(keys);
        args.extend(argv);
        client(at, &args)
    }

    /// A new hold `hold` taken at `at` ms with a lease of 1 s.
    fn take(at: u64, hold: &str) -> Vec<Monitored> {
        let at = at * 1000;
        let field = format!(":a:{hold}");
        vec![
            call(at, 0, &[KEY, "{jobs}:fence"], &["1000", "o", hold, ""]),
            script(at, &["exists", KEY]),
            script(
                at,
                &[
                    "hset", KEY, "o", "1", ":hold", hold, ":token", "1", &field, "1",
                ],
            ),
            script(at, &["pexpire", KEY, "1000"]),
        ]
    }

    fn reenter(at: u64, hold: &str) -> Vec<Monitored> {
        let at = at * 1000;
        vec![
            call(at, 0, &[KEY, "{jobs}:fence"], &["1000", "o", "x9", hold]),
            script(at, &["hget", KEY, ":hold"]),
            script(at, &["hincrby", KEY, "o", "1"]),
            script(at, &["hset", KEY, ":a:x9", "1"]),
        ]
    }

    fn renew(at: u64, hold: &str) -> Vec<Monitored> {
        let at = at * 1000;
        vec![
            call(at, 2, &["{other}", KEY], &["h0", "1000", hold, "1000"]),
            script(at, &["hget", KEY, ":hold"]),
            script(at, &["pexpire", KEY, "1000"]),
        ]
    }

    fn release(at: u64, hold: &str) -> Vec<Monitored> {
        let at = at * 1000;
        let keys = [KEY, "{jobs}:fence", "{jobs}:released"];
        vec![
            call(
                at,
                1,
                &keys,
                &["o", hold, hold, "{jobs}:freed", "", "", "1"],
            ),
            script(at, &["hget", KEY, ":hold"]),
            script(at, &["hincrby", KEY, "o", "-1"]),
            script(at, &["del", KEY]),
            script(at, &["set", "{jobs}:released", hold, "px", "60000"]),
        ]
    }

    fn replay(parts: Vec<Vec<Monitored>>) -> Touches {
        check(&parts.concat(), KEY)
    }

    #[test]
    fn holds_taken_renewed_and_released_in_turn_are_clean() {
        let touches = replay(vec![
            take(0, "h1"),
            reenter(100, "h1"),
            renew(300, "h1"),
            release(900, "h1"),
            take(901, "h2"),
            release(950, "h2"),
        ]);
        assert_eq!(touches.foreign, 0, "{touches:?}");
        assert_eq!(touches.checked, 11);
    }

    #[test]
    fn a_release_naming_another_hold_is_found() {
        let touches = replay(vec![take(0, "h1"), release(10, "h0")]);
        assert_eq!(touches.foreign, 2, "the hincrby and the del: {touches:?}");
        assert!(touches
            .first
            .is_some_and(|first| first.starts_with("hincrby")));
    }

    #[test]
    fn a_renewal_or_reentry_naming_another_hold_is_found() {
        assert_eq!(replay(vec![take(0, "h1"), renew(10, "h0")]).foreign, 1);
        assert_eq!(replay(vec![take(0, "h1"), reenter(10, "h0")]).foreign, 2);
    }

    /// A process renews a hold it has not yet heard was lost beside its new hold of the same
    /// key: only the new hold's lease is extended, and that is its own.
    #[test]
    fn two_leases_of_one_key_in_one_renewal_are_told_apart() {
        let at = 900_000;
        let cut = vec![client(at, &["pexpire", KEY, "1"])];
        let both = vec![
            call(950_000, 2, &[KEY, KEY], &["h1", "1000", "h2", "1000"]),
            script(950_000, &["hget", KEY, ":hold"]),
            script(950_000, &["hget", KEY, ":hold"]),
            script(950_000, &["pexpire", KEY, "1000"]),
        ];
        let touches = replay(vec![take(0, "h1"), cut, take(910, "h2"), both]);
        assert_eq!(touches.foreign, 0, "{touches:?}");
        let wrong = vec![
            call(950_000, 2, &[KEY, KEY], &["h2", "1000", "h1", "1000"]),
            script(950_000, &["hget", KEY, ":hold"]),
            script(950_000, &["hget", KEY, ":hold"]),
            script(950_000, &["pexpire", KEY, "1000"]),
        ];
        let cut = vec![client(at, &["pexpire", KEY, "1"])];
        let touches = replay(vec![take(0, "h1"), cut, take(910, "h2"), wrong]);
        assert_eq!(
            touches.foreign, 1,
            "the extension followed h1's lookup: {touches:?}"
        );
    }

    #[test]
    fn a_take_of_a_held_key_is_found_and_of_an_expired_one_is_not() {
        assert_eq!(replay(vec![take(0, "h1"), take(500, "h2")]).foreign, 1);
        assert_eq!(replay(vec![take(0, "h1"), take(1001, "h2")]).foreign, 0);
    }

    #[test]
    fn a_renewal_after_the_lease_ended_is_found_but_not_at_the_edge() {
        assert_eq!(replay(vec![take(0, "h1"), renew(1100, "h1")]).foreign, 1);
        assert_eq!(replay(vec![take(0, "h1"), renew(1002, "h1")]).foreign, 0);
    }

    /// A server frozen in the middle of a release finishes it after the lease's end; time stood
    /// still for the script, so the key was still the caller's. A release called after the end is
    /// still found.
    #[test]
    fn a_script_is_judged_when_it_was_called_not_when_its_writes_ran() {
        let mut frozen = release(900, "h1");
        for command in frozen.iter_mut().filter(|command| command.from_script) {
            command.at_micros = 2_500_000;
        }
        assert_eq!(replay(vec![take(0, "h1"), frozen]).foreign, 0);
        let late = replay(vec![take(0, "h1"), release(1100, "h1")]);
        assert_eq!(late.foreign, 2, "{late:?}");
        assert!(late
            .first
            .is_some_and(|first| first.ends_with("in a script called at 1100000 µs")));
    }

    #[test]
    fn a_ttl_cut_by_hand_ends_the_hold() {
        let cut = vec![client(100_000, &["pexpire", KEY, "1"])];
        assert_eq!(replay(vec![take(0, "h1"), cut, take(110, "h2")]).foreign, 0);
    }
}
