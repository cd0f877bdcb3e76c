//! [`Wheel`]: the hashed timing wheel as plain data. No clock, thread, lock or channel: time is a
//! `u64` tick count that only [`Wheel::advance`] moves forward.
//!
//! # Layout
//!
//! Level 0 is a ring of `slots` buckets, one per tick: everything in a level-0 bucket falls due at
//! the same tick. An entry further away than the current rotation of level 0 goes to an outer level
//! of 64 buckets, each bucket a whole rotation of the level inside it, so its bucket *is* its
//! remaining round count. When time reaches an outer bucket, its entries move inward once, to the
//! exact bucket they now fit. An entry therefore moves at most once per level (at most
//! `1 + ceil((64 - log2(slots)) / 6)` times in its life) and is never looked at on rotations that do
//! not concern it: per-tick work is proportional to what expires or moves, not to what is stored.
//!
//! Each level keeps an occupancy bitmap, so finding the next due bucket skips empty ones in
//! word-sized steps: [`Wheel::next_due`] is cheap, and an idle caller never needs to visit empty
//! ticks.
//!
//! # Ground rules
//!
//! * `now` only moves forward. Every entry with `deadline <= cursor` sits on the `expired` list
//!   (with `deadline == cursor`) until [`Wheel::advance`] hands it out.
//! * Every other entry sits in exactly one bucket, found from `(cursor, deadline)` alone
//!   ([`Wheel::locate`]): the lowest level whose rotation contains both. Moving the cursor never
//!   changes that answer without [`Wheel::advance`] first visiting the bucket and moving the
//!   entry.
//! * A cancel takes the value out and leaves the entry's node where it is, *vacated*
//!   (`arena.rs`): it touches the entry alone, not its neighbours in the bucket, which with many
//!   entries pending are cold. The next insert reuses the slot and takes the node out of its list
//!   first; until then it counts in no length, and `advance` takes it out of a bucket it visits
//!   like the others, without handing it out or moving it inward. Taking a node out of a list
//!   needs no knowledge of which list that is (`lists.rs`).
//! * A key is valid from insert until its entry is expired, cancelled or drained; then never again.

mod arena;
mod level;
mod lists;

use arena::Arena;
pub use arena::Key;
use level::{Level, OUTER_BITS};
use lists::Lists;

/// The largest level-0 ring a wheel accepts.
pub const MAX_SLOTS: usize = 1 << 16;

/// The most entries a wheel holds; [`Wheel::insert`] fails only when it holds this many. (Below
/// 2^32, so that an entry's place in its list is a `u32`, with room for the lists' heads.)
pub const MAX_LEN: usize = (u32::MAX - (1 << 17)) as usize;

/// The head of the list of expired entries; the buckets' heads follow.
const EXPIRED: u32 = 0;

/// An entry could not be inserted: the wheel holds [`MAX_LEN`] entries already. The value is
/// handed back.
///
/// ```
/// let full: Box<dyn std::error::Error> = Box::new(hashwheel::WheelFull("task"));
/// assert!(full.to_string().starts_with("the wheel is full"));
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct WheelFull<T>(pub T);

impl<T> std::fmt::Display for WheelFull<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the wheel is full: it holds {MAX_LEN} entries")
    }
}

impl<T: std::fmt::Debug> std::error::Error for WheelFull<T> {}

/// A hashed timing wheel holding values of type `T` until their deadline tick.
///
/// ```
/// use hashwheel::Wheel;
///
/// let mut wheel = Wheel::new(8).expect("a power of two");
/// let soon = wheel.insert(3, "soon").expect("room");
/// wheel.insert(100, "later").expect("room");
/// wheel.insert(3, "cancelled").map(|key| wheel.cancel(key)).expect("room");
///
/// assert_eq!(wheel.next_due(), Some(3));
/// assert_eq!(wheel.advance(10).collect::<Vec<_>>(), vec![(3, "soon")]);
/// assert_eq!(wheel.cancel(soon), None, "an expired key refers to nothing");
/// assert_eq!(wheel.advance(100).collect::<Vec<_>>(), vec![(100, "later")]);
/// assert!(wheel.is_empty());
/// ```
pub struct Wheel<T> {
    arena: Arena<T>,
    /// The lists: `expired` ([`EXPIRED`]), then each level's buckets.
    lists: Lists,
    levels: Box<[Level]>,
    /// log2 of the level-0 bucket count.
    inner_bits: u32,
    /// The tick the buckets are laid out around: every deadline at or before it is on `expired`.
    cursor: u64,
    /// The furthest tick any `advance` was asked for; `cursor` catches up with it lazily.
    now: u64,
}

/// Where an entry is stored.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Place {
    Expired,
    Bucket { level: usize, slot: usize },
}

impl<T> Wheel<T> {
    /// A wheel whose level-0 ring has `slots` buckets, at tick 0.
    ///
    /// `slots` must be a power of two from 1 to [`MAX_SLOTS`]. A larger ring makes inward moves
    /// rarer; a smaller one saves memory. Both are correct.
    ///
    /// # Errors
    ///
    /// [`InvalidSlots`] unless `slots` is a power of two from 1 to [`MAX_SLOTS`].
    pub fn new(slots: usize) -> Result<Self, InvalidSlots> {
        if !slots.is_power_of_two() || slots > MAX_SLOTS {
            return Err(InvalidSlots(slots));
        }
        let mut levels = vec![Level::new(0, slots.trailing_zeros(), EXPIRED + 1)];
        let mut span = levels[0].span_bits();
        let mut heads = EXPIRED + 1 + slots as u32;
        while span < 64 {
            levels.push(Level::new(span, OUTER_BITS, heads));
            heads += 1 << OUTER_BITS;
            span += OUTER_BITS;
        }
        Ok(Wheel {
            arena: Arena::new(),
            lists: Lists::new(heads),
            levels: levels.into_boxed_slice(),
            inner_bits: slots.trailing_zeros(),
            cursor: 0,
            now: 0,
        })
    }

    /// An empty wheel at tick 0 with `slots` level-0 buckets, whose keys never match a key of
    /// `previous` (until one slot has been reused 2^31 times). Drops what `previous` still
    /// holds.
    pub(crate) fn succeed(previous: Wheel<T>, slots: usize) -> Result<Self, InvalidSlots> {
        let mut wheel = Wheel::new(slots)?;
        wheel.arena = previous.arena.succeed();
        Ok(wheel)
    }

    /// The current tick: the furthest `to` that [`Wheel::advance`] was given. Every deadline at or
    /// before it is due.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// How many entries are stored (expired ones not yet handed out included).
    pub fn len(&self) -> usize {
        self.arena.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores `value` until `deadline`. A deadline at or before [`Wheel::now`] is due at once: the
    /// next [`Wheel::advance`] hands it out, reporting `now` as its deadline.
    ///
    /// # Errors
    ///
    /// [`WheelFull`], with `value` handed back, when the wheel holds [`MAX_LEN`] entries.
    pub fn insert(&mut self, deadline: u64, value: T) -> Result<Key, WheelFull<T>> {
        let deadline = deadline.max(self.now);
        let index = match self.arena.pop_cancelled() {
            Some(index) => {
                if self.lists.is_linked(index) {
                    self.unlink(index);
                }
                index
            }
            None => match self.arena.vacant_slot() {
                Some(index) => index,
                None => return Err(WheelFull(value)),
            },
        };
        let key = self.arena.fill(index, deadline, self.cursor, value);
        self.link(index, deadline);
        Ok(key)
    }

    /// Removes an entry before it expires and hands its value back. `None` if the key's entry has
    /// already left the wheel.
    ///
    /// The value is out at once. The entry's place stays where it was until the next
    /// [`Wheel::insert`] reuses it (or [`Wheel::advance`] reaches it), so that a cancel touches
    /// the entry alone, not its neighbours in its bucket.
    pub fn cancel(&mut self, key: Key) -> Option<T> {
        let index = self.arena.resolve(key)?;
        if self.arena.is_far(index) {
            self.unlink(index);
            return self
                .arena
                .remove(index, self.cursor)
                .map(|(_, value)| value);
        }
        self.arena.vacate(index)
    }

    /// Whether the key's entry is still stored.
    pub fn contains(&self, key: Key) -> bool {
        self.arena.resolve(key).is_some()
    }

    /// The value of a stored entry.
    pub fn get(&self, key: Key) -> Option<&T> {
        self.arena.value(self.arena.resolve(key)?)
    }

    /// The deadline of a stored entry (clamped to the tick it was inserted at).
    pub fn deadline(&self, key: Key) -> Option<u64> {
        Some(self.arena.deadline(self.arena.resolve(key)?, self.cursor))
    }

    /// Moves time forward to `to` (never back) and yields every entry whose deadline is at or before
    /// it, as `(deadline, value)`, in deadline order. Entries with the same deadline come in no set
    /// order.
    ///
    /// The iterator does the work as it goes. Dropping it early leaves the rest stored, still due:
    /// the next `advance`, whatever its `to`, yields them first.
    pub fn advance(&mut self, to: u64) -> Advance<'_, T> {
        self.now = self.now.max(to);
        Advance { wheel: self }
    }

    /// The earliest tick at which [`Wheel::advance`] has work to do, or `None` if the wheel is
    /// empty. It is never later than the earliest deadline stored. For an entry on an outer level
    /// it is the tick where that entry's bucket moves inward, which may come before the deadline;
    /// a bucket left with cancelled entries alone may be reported until an insert or an `advance`
    /// takes them out.
    pub fn next_due(&self) -> Option<u64> {
        if self.is_empty() {
            // Vacated nodes at most: nothing to hand out.
            return None;
        }
        if !self.lists.is_empty(EXPIRED) {
            return Some(self.cursor);
        }
        self.next_bucket().map(|(_, _, start)| start)
    }

    /// Removes every entry, returning each with the key it had and its deadline, in deadline
    /// order. The current tick stays where it is.
    pub fn drain(&mut self) -> Vec<(Key, u64, T)> {
        for level in self.levels.iter_mut() {
            level.mark_all_empty();
        }
        self.lists.clear();
        let mut drained = self.arena.drain(self.cursor);
        drained.sort_by_key(|&(_, deadline, _)| deadline);
        drained
    }

    /// Where an entry with this deadline belongs, given the current tick.
    fn locate(&self, deadline: u64) -> Place {
        if deadline <= self.cursor {
            return Place::Expired;
        }
        let highest_differing_bit = 63 - (deadline ^ self.cursor).leading_zeros();
        let level = match highest_differing_bit.checked_sub(self.inner_bits) {
            None => 0,
            Some(above) => 1 + (above / OUTER_BITS) as usize,
        };
        let slot = self.levels[level].slot_of(deadline);
        Place::Bucket { level, slot }
    }

    /// Puts a slot's node, in no list, in the list its deadline belongs to.
    fn link(&mut self, index: u32, deadline: u64) {
        match self.locate(deadline) {
            Place::Expired => self.lists.push_back(EXPIRED, index),
            Place::Bucket { level, slot } => {
                let level = &mut self.levels[level];
                self.lists.push_back(level.head(slot), index);
                level.mark_occupied(slot);
            }
        }
    }

    /// Takes a slot's node out of its list, whichever that is.
    fn unlink(&mut self, index: u32) {
        let Some(head) = self.lists.unlink(index) else {
            return;
        };
        let emptied = self.levels.iter_mut().find_map(|level| {
            let slot = level.slot_of_head(head)?;
            Some((level, slot))
        });
        if let Some((level, slot)) = emptied {
            level.mark_empty(slot);
        }
    }

    /// The first occupied bucket: `(level, slot, first tick it covers)`. Inner levels come first:
    /// everything on level `n` falls due before anything on level `n + 1`.
    fn next_bucket(&self) -> Option<(usize, usize, u64)> {
        self.levels.iter().enumerate().find_map(|(index, level)| {
            let slot = level.next_occupied(level.slot_of(self.cursor))?;
            Some((index, slot, level.slot_start(self.cursor, slot)))
        })
    }

    /// Empties one bucket whose first tick `start` has come: what is due goes to the expired list,
    /// the rest moves inward.
    fn visit(&mut self, level: usize, slot: usize, start: u64) {
        debug_assert!(
            start > self.cursor,
            "a bucket is visited once, after the cursor"
        );
        let inner = level == 0;
        let level = &mut self.levels[level];
        level.mark_empty(slot);
        let mut bucket = self.lists.take(level.head(slot));
        self.cursor = start;
        if inner {
            self.lists.append(EXPIRED, bucket);
            return;
        }
        while let Some(index) = self.lists.chain_pop(&mut bucket) {
            if self.arena.is_vacant(index) {
                self.lists.mark_unlinked(index);
            } else {
                self.link(index, self.arena.deadline(index, self.cursor));
            }
        }
    }

    fn pop_expired(&mut self) -> Option<(u64, T)> {
        let to = self.now;
        loop {
            if let Some(index) = self.lists.pop_front(EXPIRED) {
                match self.arena.remove(index, self.cursor) {
                    Some(expired) => return Some(expired),
                    None => self.lists.mark_unlinked(index),
                }
                continue;
            }
            match self.next_bucket() {
                Some((level, slot, start)) if start <= to => self.visit(level, slot, start),
                _ => {
                    self.cursor = self.cursor.max(to);
                    return None;
                }
            }
        }
    }
}

impl<T> std::fmt::Debug for Wheel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wheel")
            .field("now", &self.now)
            .field("len", &self.len())
            .field("levels", &self.levels.len())
            .finish()
    }
}

/// The iterator returned by [`Wheel::advance`].
pub struct Advance<'a, T> {
    wheel: &'a mut Wheel<T>,
}

impl<T> std::fmt::Debug for Advance<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Advance")
            .field("wheel", &self.wheel)
            .finish()
    }
}

impl<T> Iterator for Advance<'_, T> {
    type Item = (u64, T);

    fn next(&mut self) -> Option<(u64, T)> {
        self.wheel.pop_expired()
    }
}

/// The slot count given to [`Wheel::new`] is zero, not a power of two, or above [`MAX_SLOTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a wheel needs a power of two from 1 to {MAX_SLOTS} slots, not {0}")]
pub struct InvalidSlots(pub usize);

#[cfg(test)]
mod tests {
    use super::*;

    fn drain_to<T>(wheel: &mut Wheel<T>, to: u64) -> Vec<(u64, T)> {
        wheel.advance(to).collect()
    }

    #[test]
    fn rejects_bad_slot_counts() {
        assert_eq!(Wheel::<()>::new(0).err(), Some(InvalidSlots(0)));
        assert_eq!(Wheel::<()>::new(3).err(), Some(InvalidSlots(3)));
        assert!(Wheel::<()>::new(MAX_SLOTS * 2).is_err());
        assert!(Wheel::<()>::new(1).is_ok());
        assert!(Wheel::<()>::new(MAX_SLOTS).is_ok());
    }

    #[test]
    fn levels_cover_every_tick() {
        for bits in 0..=16 {
            let wheel = Wheel::<()>::new(1 << bits).expect("valid");
            let top = wheel.levels.last().expect("at least one level");
            assert!(top.span_bits() >= 64, "slots 2^{bits}");
        }
    }

    #[test]
    fn far_entries_move_inward_and_expire_on_their_tick() {
        let mut wheel = Wheel::new(4).expect("valid");
        for deadline in [5, 17, 64, 65, 1000, 4096, 1 << 40] {
            wheel.insert(deadline, deadline).expect("room");
        }
        let mut seen = Vec::new();
        for tick in 1..=5000 {
            for (deadline, value) in wheel.advance(tick) {
                assert_eq!(deadline, tick, "expired exactly on its tick");
                seen.push(value);
            }
        }
        assert_eq!(seen, vec![5, 17, 64, 65, 1000, 4096]);
        assert_eq!(drain_to(&mut wheel, 1 << 40), vec![(1 << 40, 1 << 40)]);
    }

    /// Deadlines are kept as their low 32 bits relative to the cursor: across the tick where
    /// those bits wrap, and for deadlines too far for them, each still expires on its tick.
    #[test]
    fn deadlines_expire_on_their_tick_across_the_32_bit_wrap_and_beyond_it() {
        let mut wheel = Wheel::new(64).expect("valid");
        let start = (1u64 << 32) - 10;
        assert!(drain_to(&mut wheel, start).is_empty());
        let offsets = [
            0,
            5,
            9,
            10,
            11,
            300,
            70_000,
            1 << 32,
            (1 << 32) + 1,
            1 << 33,
        ];
        let keys: Vec<Key> = offsets
            .iter()
            .map(|&offset| wheel.insert(start + offset, offset).expect("room"))
            .collect();
        for (&offset, &key) in offsets.iter().zip(&keys) {
            assert_eq!(wheel.deadline(key), Some(start + offset));
        }
        assert_eq!(wheel.cancel(keys[8]), Some((1 << 32) + 1));
        let mut seen = Vec::new();
        let mut tick = start;
        while let Some(due) = wheel.next_due() {
            assert!(due >= tick, "the next due tick never goes back");
            tick = due;
            for (deadline, offset) in wheel.advance(tick) {
                assert_eq!(deadline, start + offset, "expired exactly on its tick");
                assert_eq!(deadline, tick);
                seen.push(offset);
            }
        }
        assert_eq!(seen, vec![0, 5, 9, 10, 11, 300, 70_000, 1 << 32, 1 << 33]);
    }

    #[test]
    fn a_stale_key_cancels_nothing_after_its_slot_is_reused() {
        let mut wheel = Wheel::new(8).expect("valid");
        let first = wheel.insert(10, "first").expect("room");
        assert_eq!(wheel.cancel(first), Some("first"));
        let second = wheel.insert(10, "second").expect("room");
        assert_eq!(wheel.cancel(first), None);
        assert!(wheel.contains(second));
        assert_eq!(drain_to(&mut wheel, 10), vec![(10, "second")]);
    }

    #[test]
    fn past_deadlines_are_due_at_once() {
        let mut wheel = Wheel::new(8).expect("valid");
        assert!(drain_to(&mut wheel, 50).is_empty());
        wheel.insert(3, "late").expect("room");
        assert_eq!(wheel.next_due(), Some(50));
        assert_eq!(drain_to(&mut wheel, 0), vec![(50, "late")]);
    }

    #[test]
    fn max_deadline_never_expires_and_does_not_overflow() {
        let mut wheel = Wheel::new(512).expect("valid");
        wheel.insert(u64::MAX, "never").expect("room");
        assert!(drain_to(&mut wheel, u64::MAX - 1).is_empty());
        assert_eq!(drain_to(&mut wheel, u64::MAX), vec![(u64::MAX, "never")]);
        wheel.insert(5, "after the end").expect("room");
        assert_eq!(
            drain_to(&mut wheel, u64::MAX),
            vec![(u64::MAX, "after the end")]
        );
    }

    #[test]
    fn dropping_the_iterator_early_keeps_the_rest_due() {
        let mut wheel = Wheel::new(8).expect("valid");
        for value in 0..10 {
            wheel.insert(4 + value % 3, value).expect("room");
        }
        let first: Vec<_> = wheel.advance(100).take(4).collect();
        assert_eq!(first.len(), 4);
        let rest: Vec<_> = wheel.advance(0).collect();
        assert_eq!(rest.len(), 6);
        let mut deadlines: Vec<u64> = first.iter().chain(&rest).map(|&(d, _)| d).collect();
        let sorted = {
            let mut copy = deadlines.clone();
            copy.sort();
            copy
        };
        assert_eq!(deadlines, sorted, "deadline order across the two calls");
        deadlines.dedup();
        assert_eq!(deadlines, vec![4, 5, 6]);
    }

    #[test]
    fn nothing_is_due_once_every_entry_is_cancelled() {
        let mut wheel = Wheel::new(8).expect("valid");
        let near = wheel.insert(5, ()).expect("room");
        let far = wheel.insert(1 << 20, ()).expect("room");
        assert!(wheel.next_due().is_some());
        wheel.cancel(near).expect("stored");
        wheel.cancel(far).expect("stored");
        assert_eq!(wheel.next_due(), None);
        assert!(wheel.is_empty());
        assert!(drain_to(&mut wheel, 1 << 21).is_empty());
    }

    /// A cancelled entry stays where it was until its bucket comes or an insert reuses its
    /// slot: the bucket may still be reported due, never later than the entries left, and
    /// nothing cancelled is handed out.
    #[test]
    fn a_cancelled_entry_is_never_handed_out_and_its_place_is_let_go() {
        let mut wheel = Wheel::new(8).expect("valid");
        let early = wheel.insert(5, "early").expect("room");
        wheel.insert(300, "late").expect("room");
        assert_eq!(wheel.cancel(early), Some("early"));
        assert!(wheel.next_due() <= Some(300));
        assert!(drain_to(&mut wheel, 10).is_empty());
        let due = wheel.next_due().expect("one entry left");
        assert!(
            due > 10 && due <= 300,
            "the cancelled one's bucket is gone: {due}"
        );
        assert_eq!(drain_to(&mut wheel, 300), vec![(300, "late")]);
        assert_eq!(wheel.next_due(), None);
    }

    /// The insert that reuses a cancelled entry's slot takes its node out of the bucket it was
    /// in: that bucket, empty now, is no longer due.
    #[test]
    fn reusing_a_cancelled_slot_lets_its_bucket_go() {
        let mut wheel = Wheel::new(8).expect("valid");
        let first = wheel.insert(100, "first").expect("room");
        assert_eq!(wheel.cancel(first), Some("first"));
        let second = wheel.insert(3_000, "second").expect("room");
        assert_eq!(wheel.get(second), Some(&"second"));
        assert_eq!(wheel.deadline(second), Some(3_000));
        assert!(wheel.next_due() > Some(100), "{:?}", wheel.next_due());
        assert_eq!(drain_to(&mut wheel, 3_000), vec![(3_000, "second")]);
    }

    /// An entry cancelled after its bucket was visited, while it waits on the expired list, is
    /// not handed out either.
    #[test]
    fn an_expired_entry_cancelled_before_it_is_handed_out_stays_cancelled() {
        let mut wheel = Wheel::new(8).expect("valid");
        let keys: Vec<Key> = (0..3)
            .map(|value| wheel.insert(4, value).expect("room"))
            .collect();
        let first: Vec<(u64, i32)> = wheel.advance(4).take(1).collect();
        assert_eq!(first.len(), 1);
        let cancelled = keys
            .iter()
            .filter_map(|&key| wheel.cancel(key))
            .collect::<Vec<_>>();
        assert_eq!(cancelled.len(), 2, "the two not handed out");
        assert_eq!(wheel.next_due(), None);
        assert!(drain_to(&mut wheel, 10).is_empty());
        let again = wheel.insert(20, 9).expect("room");
        assert_eq!(drain_to(&mut wheel, 20), vec![(20, 9)]);
        assert!(!wheel.contains(again));
    }

    #[test]
    fn drain_returns_everything_in_deadline_order() {
        let mut wheel = Wheel::new(8).expect("valid");
        let keys: Vec<Key> = [30u64, 2, 900, 2]
            .iter()
            .map(|&d| wheel.insert(d, d).expect("room"))
            .collect();
        let drained = wheel.drain();
        let deadlines: Vec<u64> = drained.iter().map(|&(_, d, _)| d).collect();
        assert_eq!(deadlines, vec![2, 2, 30, 900]);
        assert!(wheel.is_empty());
        assert_eq!(wheel.next_due(), None);
        assert!(keys.iter().all(|&key| !wheel.contains(key)));
    }
}
