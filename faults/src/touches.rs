//! Whether any script call touched a lease that was not its caller's, read from the lock server's
//! own log of what it ran (`MONITOR`, which lists the commands a Lua script runs after the call
//! that ran it).
//!
//! The replay keeps, for the lock key, who holds it and until when: a hold begins at the `hset`
//! that takes the key, moves to a new owner only through a `del` or an expiry, and its end is set
//! by every `pexpire`. Each write a script makes to the key is then checked against it:
//!
//! - `hset KEY OWNER 1` (a take, or a grant after a release) needs the key free;
//! - `hincrby KEY OWNER n` (re-entry, release) needs `OWNER` to hold it;
//! - `pexpire KEY ms` (renewal, acquisition, release) and `del KEY` (release) need the owner the
//!   script last named for that key (`hexists`, `hincrby`, `hset`) to hold it.
//!
//! Expiry is read from the server's clock in the log, so a write within [`SLACK`] of the hold's
//! end is given the benefit of the doubt either way.

use testkit::Monitored;

/// How close to a hold's end (in µs) a write may be without being judged: Redis decides expiry to
/// the millisecond, at the start of a script, while the log stamps each command as it runs.
pub const SLACK: u64 = 5_000;

/// What the replay found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touches {
    /// Writes to the lock key by scripts that were checked.
    pub checked: usize,
    /// Writes to a lease held by another owner (or to a lease that had ended).
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
    owner: Option<String>,
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
    fn held_by(&self, owner: Option<&str>, at: u64) -> bool {
        owner.is_some() && self.owner.as_deref() == owner && !self.surely_over(at)
    }
    fn free(&self, at: u64) -> bool {
        self.owner.is_none() || self.maybe_over(at)
    }
}

/// Replays `log` for the lock key `key`.
pub fn check(log: &[Monitored], key: &str) -> Touches {
    let mut touches = Touches::default();
    let mut hold = Hold::default();
    // The owner the running script last named for the key.
    let mut caller: Option<String> = None;
    for command in log {
        let at = command.at_micros;
        let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
        if !command.from_script {
            caller = None;
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
            ["hexists" | "hget", k, owner] if *k == key => {
                caller = Some((*owner).to_owned());
                continue;
            }
            ["hset", k, owner, _] if *k == key => {
                let fine = hold.free(at);
                caller = Some((*owner).to_owned());
                hold = Hold {
                    owner: caller.clone(),
                    until: None,
                };
                fine
            }
            ["hincrby", k, owner, _] if *k == key => {
                caller = Some((*owner).to_owned());
                hold.held_by(Some(owner), at)
            }
            ["pexpire", k, millis] if *k == key => {
                let fine = hold.held_by(caller.as_deref(), at);
                hold.until = millis.parse::<u64>().ok().map(|ms| at + ms * 1000);
                fine
            }
            ["del", k] if *k == key => {
                let fine = hold.held_by(caller.as_deref(), at);
                hold = Hold::default();
                fine
            }
            _ => continue,
        };
        touches.checked += 1;
        if !fine {
            touches.foreign += 1;
            touches
                .first
                .get_or_insert_with(|| format!("{} at {at} µs", command.args.join(" ")));
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

    /// An acquisition by `owner` at `at` ms with a lease of 1 s.
    fn take(at: u64, owner: &str) -> Vec<Monitored> {
        let at = at * 1000;
        vec![
            client(at, &["evalsha", "acquire"]),
            script(at, &["exists", KEY]),
            script(at, &["hset", KEY, owner, "1"]),
            script(at, &["pexpire", KEY, "1000"]),
            script(at, &["incr", "{jobs}:token"]),
        ]
    }

    fn renew(at: u64, owner: &str) -> Vec<Monitored> {
        let at = at * 1000;
        vec![
            client(at, &["evalsha", "renew"]),
            script(at, &["hexists", KEY, owner]),
            script(at, &["pexpire", KEY, "1000"]),
        ]
    }

    fn release(at: u64, owner: &str) -> Vec<Monitored> {
        let at = at * 1000;
        vec![
            client(at, &["evalsha", "release"]),
            script(at, &["hget", "{jobs}:released", owner]),
            script(at, &["hexists", KEY, owner]),
            script(at, &["hincrby", KEY, owner, "-1"]),
            script(at, &["hset", "{jobs}:released", owner, "r1"]),
            script(at, &["del", KEY]),
        ]
    }

    fn replay(parts: Vec<Vec<Monitored>>) -> Touches {
        check(&parts.concat(), KEY)
    }

    #[test]
    fn holds_taken_renewed_and_released_in_turn_are_clean() {
        let touches = replay(vec![
            take(0, "a"),
            renew(300, "a"),
            release(900, "a"),
            take(901, "b"),
            release(950, "b"),
        ]);
        assert_eq!(touches.foreign, 0, "{touches:?}");
        assert_eq!(touches.checked, 9);
    }

    #[test]
    fn a_release_of_another_owners_hold_is_found() {
        let touches = replay(vec![take(0, "a"), release(10, "b")]);
        assert_eq!(touches.foreign, 2, "the hincrby and the del: {touches:?}");
        assert!(touches
            .first
            .is_some_and(|first| first.starts_with("hincrby")));
    }

    #[test]
    fn a_renewal_of_another_owners_hold_is_found() {
        let touches = replay(vec![take(0, "a"), renew(10, "b")]);
        assert_eq!(touches.foreign, 1, "{touches:?}");
    }

    #[test]
    fn a_take_of_a_held_key_is_found_and_of_an_expired_one_is_not() {
        assert_eq!(replay(vec![take(0, "a"), take(500, "b")]).foreign, 1);
        assert_eq!(replay(vec![take(0, "a"), take(1001, "b")]).foreign, 0);
    }

    #[test]
    fn a_renewal_after_the_lease_ended_is_found_but_not_at_the_edge() {
        assert_eq!(replay(vec![take(0, "a"), renew(1100, "a")]).foreign, 1);
        assert_eq!(replay(vec![take(0, "a"), renew(1002, "a")]).foreign, 0);
    }

    #[test]
    fn a_ttl_cut_by_hand_ends_the_hold() {
        let cut = vec![client(100_000, &["pexpire", KEY, "1"])];
        assert_eq!(replay(vec![take(0, "a"), cut, take(110, "b")]).foreign, 0);
    }
}
