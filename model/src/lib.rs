//! A model of the lock protocol that `redis-lease` runs against Redis, checked exhaustively with
//! [`stateright`]: every interleaving of a few clients' acquisitions, renewals, releases and
//! in-process hand-offs, of the store's expiries, of messages delayed or lost, of replication
//! and one failover, up to a bound on time.
//!
//! What is modelled, in ticks of real time:
//!
//! * **The store** holds at most one hold (its owner, fencing token and expiry) and the fencing
//!   counter. A new hold takes the token one above the counter; a hold expires `lease` ticks
//!   after the store last wrote it. A renewal extends only the hold it names; a release frees
//!   only the hold it names.
//! * **Replication and failover**: a replica holds what was last replicated; with replica
//!   acknowledgements every write is replicated before it is answered, without them replication
//!   happens whenever it happens. One failover may promote the replica (losing what it did not
//!   have) and raises the epoch of the tokens above every token handed out before it.
//! * **Clients** send requests that the network may delay, reorder or lose, as it may lose the
//!   replies. A client believes it holds from a confirmed acquisition until its deadline: the
//!   time the confirmed request (acquisition or renewal) was *sent*, plus the lease, minus the
//!   client's margin for clock drift. Its clock may run slow by up to `drift` ticks over a
//!   lease, so in real time it may believe up to `drift` ticks longer than it computes.
//! * **Hand-off in memory**: the first client runs two threads. When one holds and the other
//!   waits, the holder may pass the hold to the waiter without the store, with the next of the
//!   tokens the store reserved beside the hold, if the hold is known valid for a margin more.
//!
//! Properties: never two threads that believe they hold at the same real time (inside the
//! timing assumptions: `margin >= drift`, and replica acknowledgements when a failover may
//! happen); fencing tokens strictly rising in the order holders begin; every thread able to hold
//! at some point (the model is not vacuous). Liveness under fairness is not checked: with
//! messages that may always be lost, no bound on time makes a waiter's turn certain.
//!
//! Pub/sub is not modelled: an announcement only makes a waiter look again sooner, and a
//! waiter here may look again at any moment, which covers an announcement early, late or lost.
//!
//! [`Bugs`] plants known protocol bugs, each of which the checker must find.

use stateright::{Model, Property};

/// How large a world to check.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Clients (the first one has two threads).
    pub clients: u8,
    /// Acquisitions each thread may make.
    pub acquisitions: u8,
    /// The lease, in ticks.
    pub lease: u8,
    /// The last tick.
    pub until: u8,
    /// Whether one failover may happen.
    pub failover: bool,
    /// Messages the network may lose in all.
    pub losses: u8,
    /// Renewals each hold may send.
    pub renewals: u8,
}

impl Bounds {
    /// What `scripts/test` checks: 2 clients (3 threads), one acquisition each, a lease of 3
    /// ticks over 4, one failover, one message lost, one renewal per hold.
    pub const SMALL: Bounds = Bounds {
        clients: 2,
        acquisitions: 1,
        lease: 3,
        until: 4,
        failover: true,
        losses: 1,
        renewals: 1,
    };

    /// A longer world, for a run by hand (`cargo run --release -p lease-model -- large`): two
    /// ticks more. (Three clients over 5 ticks outgrow 24 GiB of memory.)
    pub const LARGE: Bounds = Bounds {
        clients: 2,
        acquisitions: 1,
        lease: 3,
        until: 6,
        failover: true,
        losses: 1,
        renewals: 1,
    };
}

/// The timing assumptions and the deployment.
#[derive(Clone, Copy, Debug)]
pub struct Assumptions {
    /// How many ticks a client's clock may lag real time over a lease.
    pub drift: u8,
    /// How many ticks a client takes off its deadline for drift.
    pub margin: u8,
    /// Whether every write is acknowledged by the replica before it is answered.
    pub acks: bool,
}

impl Assumptions {
    /// The assumptions the crate states: a margin that covers the drift, acknowledgements where
    /// a failover may happen.
    pub const STATED: Assumptions = Assumptions {
        drift: 1,
        margin: 1,
        acks: true,
    };
}

/// Protocol bugs to plant (none in [`Bugs::NONE`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Bugs {
    /// A release frees the lock whichever hold it names.
    pub release_ignores_owner: bool,
    /// A new hold is given the counter's value, not one above it.
    pub token_not_raised: bool,
    /// A deadline counts from when the reply came, not when the request was sent.
    pub deadline_from_reply: bool,
    /// A hold handed to another thread in memory gets a deadline of its own, counted from the
    /// hand-off, instead of the hold's.
    pub handoff_fresh_deadline: bool,
}

impl Bugs {
    /// The protocol as built.
    pub const NONE: Bugs = Bugs {
        release_ignores_owner: false,
        token_not_raised: false,
        deadline_from_reply: false,
        handoff_fresh_deadline: false,
    };
}

/// The property that no two threads believe they hold at the same real time.
pub const EXCLUSION: &str = "never two believed holders";
/// The property that each holder begins with a token above every earlier holder's.
pub const ORDER: &str = "tokens rise in holding order";
/// The property that every thread holds at some point (the model is not vacuous).
pub const EVERY_THREAD_HOLDS: &str = "every thread holds in turn";

/// The lock protocol with its bounds, assumptions and planted bugs.
#[derive(Clone, Debug)]
pub struct LeaseModel {
    /// How large a world.
    pub bounds: Bounds,
    /// The timing assumptions and the deployment.
    pub assumptions: Assumptions,
    /// The bugs planted.
    pub bugs: Bugs,
    /// The properties checked (by name), or every one if empty: a search for one property's
    /// counterexample ends at the first it finds.
    pub checked: &'static [&'static str],
}

/// A hold in the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hold {
    /// The client that holds it.
    pub client: u8,
    /// Its fencing token.
    pub token: u16,
    /// The tick at which it expires.
    pub expires: u8,
    /// The last token reserved for the client's threads to hand on.
    pub reserved: u16,
}

/// What the store (or the replica) holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Store {
    /// The hold of the lock, if it is held.
    pub hold: Option<Hold>,
    /// The fencing counter: the last token handed out or reserved.
    pub counter: u16,
}

/// A message on its way: a request of `thread` sent at tick `sent`, or the store's reply to it.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Message {
    /// Take the lock as a new hold.
    Acquire { thread: u8, sent: u8 },
    /// The new hold's token and the last token reserved beside it, or `None`: held by another.
    Acquired {
        thread: u8,
        sent: u8,
        token: Option<(u16, u16)>,
    },
    /// Extend the hold `token` names.
    Renew { thread: u8, token: u16, sent: u8 },
    /// Whether the hold was extended.
    Renewed {
        thread: u8,
        token: u16,
        sent: u8,
        ok: bool,
    },
    /// Free the hold `token` names (no reply is awaited).
    Release { client: u8, token: u16 },
}

/// What a thread is doing.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Neither holding nor asking.
    Idle,
    /// Waiting for the answer to its acquisition.
    Asking,
    /// Believes it holds `token` until `until` (real time, the worst case of its clock), with
    /// the tokens up to `reserved` to hand on; `renewals` it may still send, one at a time.
    Holding {
        token: u16,
        until: u8,
        reserved: u16,
        renewing: bool,
        renewals: u8,
    },
}

/// One thread of a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Thread {
    /// The client it belongs to.
    pub client: u8,
    /// What it is doing.
    pub phase: Phase,
    /// Acquisitions it may still make.
    pub left: u8,
}

/// The whole world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct World {
    /// Real time, in ticks.
    pub now: u8,
    /// What the primary holds.
    pub store: Store,
    /// What the replica holds: what a failover brings back.
    pub replica: Store,
    /// Whether the failover happened.
    pub failed_over: bool,
    /// Messages lost so far.
    pub lost: u8,
    /// In flight, sorted: the order of a set.
    pub network: Vec<Message>,
    /// Every client's threads (the first client's two first).
    pub threads: Vec<Thread>,
    /// The highest token any holder began with.
    pub highest: u16,
    /// A holder began with a token not above an earlier holder's.
    pub token_fell: bool,
    /// Which threads held at some point (a bit each).
    pub held: u16,
}

/// A step of the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Real time moves on a tick: holds expire, deadlines pass.
    Tick,
    /// A thread asks for the lock.
    Ask(u8),
    /// A holding thread renews its hold.
    Renew(u8),
    /// A holding thread releases its hold.
    Release(u8),
    /// Thread `from` passes its hold to thread `to` of the same client.
    HandOff {
        /// The holder.
        from: u8,
        /// The waiter.
        to: u8,
    },
    /// The message at this index in the network arrives.
    Deliver(usize),
    /// The message at this index in the network is lost.
    Lose(usize),
    /// The replica catches up with the primary.
    Replicate,
    /// The replica is promoted, in a new epoch of tokens.
    Failover,
}

/// The first token of the epoch after a failover: above any token of the first epoch.
const EPOCH: u16 = 1000;

impl LeaseModel {
    /// The protocol as built, under the stated assumptions.
    pub fn new(bounds: Bounds) -> LeaseModel {
        LeaseModel {
            bounds,
            assumptions: Assumptions::STATED,
            bugs: Bugs::NONE,
            checked: &[],
        }
    }

    fn deadline(&self, sent: u8, now: u8) -> u8 {
        let from = if self.bugs.deadline_from_reply {
            now
        } else {
            sent
        };
        (from + self.bounds.lease + self.assumptions.drift).saturating_sub(self.assumptions.margin)
    }

    /// Marks `thread` as beginning to hold `token`.
    fn begins(&self, world: &mut World, thread: usize, token: u16) {
        if token <= world.highest {
            world.token_fell = true;
        }
        world.highest = world.highest.max(token);
        world.held |= 1 << thread;
    }

    fn written(&self, world: &mut World) {
        if self.assumptions.acks {
            world.replica = world.store;
        }
    }

    fn receive(&self, world: &mut World, message: Message) {
        let now = world.now;
        let lease = self.bounds.lease;
        match message {
            Message::Acquire { thread, sent } => {
                let client = world.threads[usize::from(thread)].client;
                let token = if world.store.hold.is_none() {
                    let token = if self.bugs.token_not_raised {
                        world.store.counter.max(1)
                    } else {
                        world.store.counter + 1
                    };
                    // The first client's two threads hand the hold on: one token reserved.
                    let reserved = if client == 0 { token + 1 } else { token };
                    world.store.counter = reserved;
                    world.store.hold = Some(Hold {
                        client,
                        token,
                        expires: now + lease,
                        reserved,
                    });
                    self.written(world);
                    Some((token, reserved))
                } else {
                    None
                };
                insert(
                    &mut world.network,
                    Message::Acquired {
                        thread,
                        sent,
                        token,
                    },
                );
            }
            Message::Acquired {
                thread,
                sent,
                token,
            } => {
                let index = usize::from(thread);
                if world.threads[index].phase != Phase::Asking {
                    return;
                }
                let until = self.deadline(sent, now);
                world.threads[index].phase = match token {
                    // A reply that comes after the deadline is a call that timed out: the client
                    // has given it up (and undoes it behind it).
                    Some((token, reserved)) if now < until => {
                        self.begins(world, index, token);
                        Phase::Holding {
                            token,
                            until,
                            reserved,
                            renewing: false,
                            renewals: self.bounds.renewals,
                        }
                    }
                    _ => Phase::Idle,
                };
            }
            Message::Renew {
                thread,
                token,
                sent,
            } => {
                let client = world.threads[usize::from(thread)].client;
                let ok = match &mut world.store.hold {
                    Some(hold) if names(hold, client, token) => {
                        hold.expires = now + lease;
                        true
                    }
                    _ => false,
                };
                if ok {
                    self.written(world);
                }
                insert(
                    &mut world.network,
                    Message::Renewed {
                        thread,
                        token,
                        sent,
                        ok,
                    },
                );
            }
            Message::Renewed {
                thread,
                token,
                sent,
                ok,
            } => {
                let deadline = self.deadline(sent, now);
                let phase = &mut world.threads[usize::from(thread)].phase;
                match phase {
                    Phase::Holding { token: held, .. } if *held != token => {}
                    Phase::Holding {
                        until, renewing, ..
                    } if ok => {
                        *until = (*until).max(deadline);
                        *renewing = false;
                    }
                    // Told it is lost.
                    Phase::Holding { .. } => *phase = Phase::Idle,
                    _ => {}
                }
            }
            Message::Release { client, token } => {
                let named = world
                    .store
                    .hold
                    .is_some_and(|hold| names(&hold, client, token));
                if named || (self.bugs.release_ignores_owner && world.store.hold.is_some()) {
                    world.store.hold = None;
                    self.written(world);
                }
            }
        }
    }
}

/// Whether a request of `client` about `token` names `hold`: the hold's own token, or one of the
/// tokens reserved beside it, which the client's threads hold it by after a hand-off.
fn names(hold: &Hold, client: u8, token: u16) -> bool {
    hold.client == client && hold.token <= token && token <= hold.reserved
}

/// Adds `message` to the set in flight, kept sorted.
fn insert(network: &mut Vec<Message>, message: Message) {
    let at = network.partition_point(|other| *other < message);
    network.insert(at, message);
}

/// Whether the thread believes it holds at `now`.
fn believes(thread: &Thread, now: u8) -> bool {
    matches!(thread.phase, Phase::Holding { until, .. } if now < until)
}

impl Model for LeaseModel {
    type State = World;
    type Action = Step;

    fn init_states(&self) -> Vec<World> {
        let mut threads = vec![Thread {
            client: 0,
            phase: Phase::Idle,
            left: self.bounds.acquisitions,
        }];
        for client in 0..self.bounds.clients {
            threads.push(Thread {
                client,
                phase: Phase::Idle,
                left: self.bounds.acquisitions,
            });
        }
        vec![World {
            now: 0,
            store: Store::default(),
            replica: Store::default(),
            failed_over: false,
            lost: 0,
            network: Vec::new(),
            threads,
            highest: 0,
            token_fell: false,
            held: 0,
        }]
    }

    fn actions(&self, world: &World, steps: &mut Vec<Step>) {
        if world.now < self.bounds.until {
            steps.push(Step::Tick);
        }
        for (index, thread) in world.threads.iter().enumerate() {
            let id = index as u8;
            match thread.phase {
                Phase::Idle if thread.left > 0 => steps.push(Step::Ask(id)),
                Phase::Holding {
                    renewing, renewals, ..
                } => {
                    if !renewing && renewals > 0 {
                        steps.push(Step::Renew(id));
                    }
                    steps.push(Step::Release(id));
                    for (other, waiter) in world.threads.iter().enumerate() {
                        if other != index
                            && waiter.client == thread.client
                            && waiter.phase == Phase::Asking
                        {
                            steps.push(Step::HandOff {
                                from: id,
                                to: other as u8,
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        for index in 0..world.network.len() {
            steps.push(Step::Deliver(index));
            if world.lost < self.bounds.losses {
                steps.push(Step::Lose(index));
            }
        }
        if !self.assumptions.acks && world.replica != world.store {
            steps.push(Step::Replicate);
        }
        if self.bounds.failover && !world.failed_over {
            steps.push(Step::Failover);
        }
    }

    fn next_state(&self, last: &World, step: Step) -> Option<World> {
        let mut world = last.clone();
        match step {
            Step::Tick => {
                world.now += 1;
                let now = world.now;
                for store in [&mut world.store, &mut world.replica] {
                    if store.hold.is_some_and(|hold| hold.expires <= now) {
                        store.hold = None;
                    }
                }
                // A thread past its deadline stops believing (its watchdog tells it so).
                for thread in &mut world.threads {
                    if matches!(thread.phase, Phase::Holding { until, .. } if until <= now) {
                        thread.phase = Phase::Idle;
                    }
                }
            }
            Step::Ask(thread) => {
                let index = usize::from(thread);
                world.threads[index].phase = Phase::Asking;
                world.threads[index].left -= 1;
                insert(
                    &mut world.network,
                    Message::Acquire {
                        thread,
                        sent: world.now,
                    },
                );
            }
            Step::Renew(thread) => {
                if let Phase::Holding {
                    token,
                    renewing,
                    renewals,
                    ..
                } = &mut world.threads[usize::from(thread)].phase
                {
                    *renewing = true;
                    *renewals -= 1;
                    let renew = Message::Renew {
                        thread,
                        token: *token,
                        sent: world.now,
                    };
                    insert(&mut world.network, renew);
                }
            }
            Step::Release(thread) => {
                let index = usize::from(thread);
                if let Phase::Holding { token, .. } = world.threads[index].phase {
                    world.threads[index].phase = Phase::Idle;
                    let client = world.threads[index].client;
                    insert(&mut world.network, Message::Release { client, token });
                }
            }
            Step::HandOff { from, to } => {
                let (from, to) = (usize::from(from), usize::from(to));
                let Phase::Holding {
                    token,
                    until,
                    reserved,
                    ..
                } = world.threads[from].phase
                else {
                    return None;
                };
                // Passed only while known valid for a margin more (the watchdog's third of a
                // lease), and with a reserved token left; the new holder inherits the deadline.
                if token >= reserved || until <= world.now + self.bounds.lease / 3 {
                    return None;
                }
                let until = if self.bugs.handoff_fresh_deadline {
                    self.deadline(world.now, world.now)
                } else {
                    until
                };
                world.threads[from].phase = Phase::Idle;
                world.threads[to].phase = Phase::Holding {
                    token: token + 1,
                    until,
                    reserved,
                    renewing: false,
                    renewals: self.bounds.renewals,
                };
                self.begins(&mut world, to, token + 1);
            }
            Step::Deliver(index) => {
                let message = world.network.remove(index);
                self.receive(&mut world, message);
            }
            Step::Lose(index) => {
                world.network.remove(index);
                world.lost += 1;
            }
            Step::Replicate => world.replica = world.store,
            Step::Failover => {
                world.failed_over = true;
                world.store = world.replica;
                // The new primary's epoch: tokens from above any of the old one's.
                world.store.counter = world.store.counter.max(EPOCH);
                world.replica = world.store;
            }
        }
        Some(world)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let all = vec![
            Property::always(EXCLUSION, |_, world: &World| {
                world
                    .threads
                    .iter()
                    .filter(|thread| believes(thread, world.now))
                    .count()
                    <= 1
            }),
            Property::always(ORDER, |_, world: &World| !world.token_fell),
            Property::sometimes(EVERY_THREAD_HOLDS, |_, world: &World| {
                world.held.count_ones() as usize == world.threads.len()
            }),
        ];
        all.into_iter()
            .filter(|property| self.checked.is_empty() || self.checked.contains(&property.name))
            .collect()
    }

    fn within_boundary(&self, world: &World) -> bool {
        world.now <= self.bounds.until
    }
}
