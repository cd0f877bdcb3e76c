//! Slot storage for the wheel: one vector of slots addressed by generational keys, each holding
//! a value, the low 32 bits of its deadline and a generation. Where a slot's node sits in the
//! wheel's lists is `lists.rs`'s business; this file knows which slots hold a value, which are
//! free, and which a cancel has vacated.
//!
//! A deadline is kept as its low 32 bits: every stored deadline is at or after the wheel's
//! cursor, so it is the one tick of those bits in the 2^32 ticks from the cursor on. A deadline
//! further than that from the cursor when it is stored (a month and a half of 1 ms ticks) is kept
//! whole in a map beside, and marked in its slot. A slot's generation is bumped every time its
//! value is removed, so a [`Key`] kept after its entry expired or was cancelled never matches the
//! slot's next occupant.
//!
//! A slot is *stored* (it holds a value), *free* (on the free list, threaded through the
//! `deadline` fields of free slots), or *vacated*: a cancel took its value out and left its node
//! in its list, touching nothing but the slot (with a million entries whose handles were kept,
//! the node's neighbours are cold, and rewriting them cost a cancel more than half its time).
//! Vacated slots wait on the `cancelled` stack, the latest on top, for the next insert, which
//! takes the node out of its list if it is still in one and fills the slot; a vacated slot that
//! was cancelled just before is still in the caches.

use super::MAX_LEN;
use std::collections::HashMap;

/// The deadline whose low 32 bits are `low`, in the 2^32 ticks from `cursor` on.
#[inline]
fn near_deadline(low: u32, cursor: u64) -> u64 {
    cursor.wrapping_add(u64::from(low.wrapping_sub(cursor as u32)))
}

/// The end of the free list.
const NIL: u32 = u32::MAX;

/// Generations count modulo 2^31, so that the top bit of a raw key is free for callers' flags.
const GENERATION_MASK: u32 = u32::MAX >> 1;

/// Set in a slot's generation word while its deadline is kept whole in the far map.
const FAR: u32 = 1 << 31;

/// A handle to one entry of a [`Wheel`](super::Wheel): the slot index and the generation it was
/// inserted under. A key whose entry has left the wheel refers to nothing, even after its slot is
/// reused (until the same slot has been reused 2^31 times).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Key(u64);

impl Key {
    fn new(index: u32, generation: u32) -> Self {
        Key(u64::from(generation) << 32 | u64::from(index))
    }

    fn index(self) -> u32 {
        self.0 as u32
    }

    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The key as one integer, for callers that store keys in atomics. The top bit is always 0.
    pub fn to_raw(self) -> u64 {
        self.0
    }

    /// Rebuilds a key from [`Key::to_raw`]; the top bit is ignored.
    pub fn from_raw(raw: u64) -> Self {
        Key(raw & (u64::MAX >> 1))
    }
}

struct Slot<T> {
    /// `None` while the slot is free or vacated.
    value: Option<T>,
    /// The deadline's low 32 bits (see the module's notes); in a free slot, the next free slot.
    deadline: u32,
    /// The generation, and [`FAR`] while the deadline is in the far map.
    generation: u32,
}

impl<T> Slot<T> {
    fn generation(&self) -> u32 {
        self.generation & GENERATION_MASK
    }
}

pub(crate) struct Arena<T> {
    slots: Vec<Slot<T>>,
    /// The first free slot; the rest follow through their `deadline` fields.
    free: u32,
    /// The deadlines too far from the cursor for 32 bits, by slot.
    far: HashMap<u32, u64>,
    /// Vacated slots, the latest last.
    cancelled: Vec<u32>,
    /// Slots holding a value.
    len: usize,
    /// The generation a slot starts with when it is first pushed.
    first_generation: u32,
}

impl<T> Arena<T> {
    pub(crate) fn new() -> Self {
        Arena {
            slots: Vec::new(),
            free: NIL,
            far: HashMap::new(),
            cancelled: Vec::new(),
            len: 0,
            first_generation: 0,
        }
    }

    /// An empty arena whose slots start at a generation past every generation of this one, so
    /// that no key of this arena matches an entry of the new one (until a slot has been reused
    /// 2^31 times). Drops what this one still stores; its memory is freed.
    pub(crate) fn succeed(self) -> Self {
        let latest = self
            .slots
            .iter()
            .map(|slot| slot.generation().wrapping_sub(self.first_generation) & GENERATION_MASK)
            .max()
            .unwrap_or(0);
        Arena {
            first_generation: self.first_generation.wrapping_add(latest).wrapping_add(1)
                & GENERATION_MASK,
            ..Arena::new()
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// A slot for a new value, taken off the free list, or added; `None` when the arena holds
    /// [`MAX_LEN`] slots, none of them free. The caller fills it.
    pub(crate) fn vacant_slot(&mut self) -> Option<u32> {
        if self.free != NIL {
            let index = self.free;
            self.free = self.slots[index as usize].deadline;
            return Some(index);
        }
        let index = self.slots.len();
        if index >= MAX_LEN {
            return None;
        }
        self.slots.push(Slot {
            value: None,
            deadline: NIL,
            generation: self.first_generation,
        });
        Some(index as u32)
    }

    /// Puts a value due at `deadline` (at or after `cursor`) in a slot that holds none, taken off
    /// the free list or the `cancelled` stack, and whose node is in no list: the caller puts it
    /// in one.
    #[inline]
    pub(crate) fn fill(&mut self, index: u32, deadline: u64, cursor: u64, value: T) -> Key {
        debug_assert!(deadline >= cursor, "a deadline before the cursor");
        let slot = &mut self.slots[index as usize];
        debug_assert!(slot.value.is_none(), "a slot filled twice");
        slot.value = Some(value);
        slot.deadline = deadline as u32;
        let generation = slot.generation();
        self.len += 1;
        if deadline - cursor > u64::from(u32::MAX) {
            self.mark_far(index, deadline);
        }
        Key::new(index, generation)
    }

    /// The index a key refers to, if its entry is still stored.
    pub(crate) fn resolve(&self, key: Key) -> Option<u32> {
        let slot = self.slots.get(key.index() as usize)?;
        (slot.generation() == key.generation() && slot.value.is_some()).then_some(key.index())
    }

    /// A stored or vacated slot's deadline, given the cursor (which it is at or after).
    #[inline]
    pub(crate) fn deadline(&self, index: u32, cursor: u64) -> u64 {
        let slot = &self.slots[index as usize];
        if slot.generation & FAR != 0 {
            return self.far_deadline(index);
        }
        near_deadline(slot.deadline, cursor)
    }

    /// Whether a stored slot's deadline is kept in the far map.
    #[inline]
    pub(crate) fn is_far(&self, index: u32) -> bool {
        self.slots[index as usize].generation & FAR != 0
    }

    #[cold]
    fn mark_far(&mut self, index: u32, deadline: u64) {
        self.slots[index as usize].generation |= FAR;
        self.far.insert(index, deadline);
    }

    #[cold]
    fn far_deadline(&self, index: u32) -> u64 {
        self.far.get(&index).copied().unwrap_or(u64::MAX)
    }

    #[cold]
    fn forget_far(&mut self, index: u32) -> u64 {
        self.far.remove(&index).unwrap_or(u64::MAX)
    }

    pub(crate) fn value(&self, index: u32) -> Option<&T> {
        self.slots[index as usize].value.as_ref()
    }

    /// Whether a slot holds no value: a slot whose node is in a list is then vacated.
    #[inline]
    pub(crate) fn is_vacant(&self, index: u32) -> bool {
        self.slots[index as usize].value.is_none()
    }

    /// Takes a stored slot's value out, leaving the slot vacated: its node stays in its list and
    /// the slot goes on the `cancelled` stack. Its deadline must be near (see
    /// [`Arena::is_far`]), so that nothing else refers to the slot.
    #[inline]
    pub(crate) fn vacate(&mut self, index: u32) -> Option<T> {
        let slot = &mut self.slots[index as usize];
        debug_assert!(slot.generation & FAR == 0, "a far deadline vacated");
        let value = slot.value.take()?;
        slot.generation = slot.generation().wrapping_add(1) & GENERATION_MASK;
        self.len -= 1;
        self.cancelled.push(index);
        Some(value)
    }

    /// The slot vacated last, taken off the `cancelled` stack: the caller takes its node out of
    /// its list, if it is still in one, and fills it.
    #[inline]
    pub(crate) fn pop_cancelled(&mut self) -> Option<u32> {
        self.cancelled.pop()
    }

    /// Puts a slot that holds no value and whose node is in no list on the free list.
    #[inline]
    fn free(&mut self, index: u32) {
        self.slots[index as usize].deadline = self.free;
        self.free = index;
    }

    /// Takes a stored slot's value out and frees the slot; its node must be in no list. `None`
    /// if the slot held no value.
    #[inline]
    pub(crate) fn remove(&mut self, index: u32, cursor: u64) -> Option<(u64, T)> {
        let slot = &mut self.slots[index as usize];
        let value = slot.value.take()?;
        let far = slot.generation & FAR != 0;
        let low = slot.deadline;
        slot.generation = slot.generation().wrapping_add(1) & GENERATION_MASK;
        let deadline = if far {
            self.forget_far(index)
        } else {
            near_deadline(low, cursor)
        };
        self.free(index);
        self.len -= 1;
        Some((deadline, value))
    }

    /// Removes every stored value, returning each with the key it had and its deadline, and
    /// frees every slot. The caller empties every list.
    pub(crate) fn drain(&mut self, cursor: u64) -> Vec<(Key, u64, T)> {
        let mut drained = Vec::with_capacity(self.len);
        self.cancelled.clear();
        self.free = NIL;
        for index in (0..self.slots.len() as u32).rev() {
            let generation = self.slots[index as usize].generation();
            match self.remove(index, cursor) {
                Some((deadline, value)) => {
                    drained.push((Key::new(index, generation), deadline, value))
                }
                None => self.free(index),
            }
        }
        drained
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stores a value in a free or new slot, as the wheel's insert does.
    fn insert<T>(arena: &mut Arena<T>, deadline: u64, cursor: u64, value: T) -> (Key, u32) {
        let index = arena.vacant_slot().expect("room");
        (arena.fill(index, deadline, cursor, value), index)
    }

    #[test]
    fn an_entry_for_a_boxed_closure_is_thirty_two_bytes() {
        let slot = std::mem::size_of::<Slot<Box<dyn FnOnce() + Send>>>();
        assert_eq!(slot + super::super::lists::NODE_BYTES, 32);
    }

    #[test]
    fn deadlines_near_and_far_from_the_cursor_come_back_whole() {
        let mut arena = Arena::new();
        let cursor = (1u64 << 32) - 3;
        let deadlines = [
            cursor,
            cursor + 5,
            cursor + u64::from(u32::MAX),
            cursor + u64::from(u32::MAX) + 1,
            u64::MAX,
        ];
        let stored: Vec<(Key, u32)> = deadlines
            .iter()
            .map(|&deadline| insert(&mut arena, deadline, cursor, deadline))
            .collect();
        assert_eq!(arena.far.len(), 2, "the last two do not fit in 32 bits");
        for (&deadline, &(key, index)) in deadlines.iter().zip(&stored) {
            assert_eq!(
                arena.resolve(key),
                Some(index),
                "the far mark is no part of a key"
            );
            assert_eq!(arena.deadline(index, cursor), deadline);
            // Later, with the cursor moved on as far as the deadline allows.
            assert_eq!(arena.deadline(index, deadline.min(cursor + 6)), deadline);
        }
        let (far_key, far_index) = stored[3];
        assert!(arena.is_far(far_index) && !arena.is_far(stored[2].1));
        assert_eq!(
            arena.remove(far_index, cursor + 7),
            Some((deadlines[3], deadlines[3]))
        );
        assert_eq!(arena.resolve(far_key), None);
        let (again, reused) = insert(&mut arena, cursor + 9, cursor + 8, 0);
        assert_eq!(reused, far_index);
        assert_eq!(
            arena.deadline(reused, cursor + 8),
            cursor + 9,
            "the far mark went"
        );
        assert!(arena.resolve(again).is_some());
        assert_eq!(arena.drain(cursor + 8).len(), 5);
        assert!(arena.far.is_empty());
    }

    #[test]
    fn no_key_of_an_arena_matches_its_successor() {
        let mut arena = Arena::new();
        let mut keys = Vec::new();
        for round in 0..5 {
            let (key, index) = insert(&mut arena, round, 0, round);
            keys.push(key);
            if round % 2 == 0 {
                arena.remove(index, 0);
            }
        }
        let mut next = arena.succeed();
        for round in 0..10 {
            let (key, index) = insert(&mut next, round, 0, round);
            assert!(keys.iter().all(|&old| next.resolve(old).is_none()));
            assert!(!keys.contains(&key));
            next.remove(index, 0);
        }
    }

    #[test]
    fn freed_slots_are_reused_with_a_new_generation() {
        let mut arena = Arena::new();
        let (first, index) = insert(&mut arena, 1, 0, "a");
        assert_eq!(arena.remove(index, 0), Some((1, "a")));
        assert_eq!(arena.resolve(first), None);
        let (second, reused) = insert(&mut arena, 2, 0, "b");
        assert_eq!(reused, index);
        assert_ne!(first, second);
        assert_eq!(arena.resolve(second), Some(index));
        assert_eq!(arena.len(), 1);
    }

    /// A vacated slot keeps nothing a key can reach, waits on the stack, latest first, and is
    /// freed by a drain like the rest.
    #[test]
    fn a_vacated_slot_is_out_of_reach_until_it_is_filled_again() {
        let mut arena = Arena::new();
        let (first, a) = insert(&mut arena, 7, 0, "a");
        let (_, b) = insert(&mut arena, 8, 0, "b");
        assert_eq!(arena.vacate(a), Some("a"));
        assert_eq!(arena.vacate(a), None, "vacated once");
        assert_eq!(arena.resolve(first), None);
        assert!(arena.is_vacant(a) && !arena.is_vacant(b));
        assert_eq!(arena.deadline(a, 0), 7, "its deadline is still there");
        assert_eq!(arena.len(), 1);
        assert_eq!(arena.vacate(b), Some("b"));
        assert_eq!(arena.pop_cancelled(), Some(b));
        let again = arena.fill(b, 9, 0, "c");
        assert_eq!(arena.resolve(again), Some(b));
        assert_eq!(arena.drain(0).len(), 1, "the vacated slot holds nothing");
        assert_eq!(arena.pop_cancelled(), None, "a drain frees vacated slots");
        let (_, reused) = insert(&mut arena, 1, 0, "d");
        assert!(reused == a || reused == b);
    }
}
