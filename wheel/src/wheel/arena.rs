//! Node storage for the wheel: one vector of slots addressed by generational keys, threaded into
//! intrusive doubly linked lists (one list per bucket, and the free list).
//!
//! A slot's value, deadline and generation sit together in one vector, its two list links in a
//! second vector beside it, indexed alike. A deadline is kept as its low 32 bits: every stored
//! deadline is at or after the wheel's cursor, so it is the one tick of those bits in the 2^32
//! ticks from the cursor on. A deadline further than that from the cursor when it is stored (a
//! month and a half of 1 ms ticks) is kept whole in a map beside, and marked in its slot.
//!
//! Taking an entry out of a list rewrites the links of its neighbours, which are anywhere in the
//! arena: in the links vector (8 bytes an entry, a third of the slots' size) those writes land in
//! far fewer cache lines, and more often in a cache, than they would in whole slots. Indices are
//! `u32` so that an entry stays small (24 + 8 bytes for a boxed closure); [`NIL`] marks the end of
//! a list. A slot's generation is bumped every time its value is removed, so a [`Key`] kept after
//! its entry expired or was cancelled never matches the slot's next occupant.

use std::collections::HashMap;

/// The deadline whose low 32 bits are `low`, in the 2^32 ticks from `cursor` on.
#[inline]
fn near_deadline(low: u32, cursor: u64) -> u64 {
    cursor.wrapping_add(u64::from(low.wrapping_sub(cursor as u32)))
}

/// The end of a list.
pub(crate) const NIL: u32 = u32::MAX;

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
    /// `None` while the slot is on the free list.
    value: Option<T>,
    /// The deadline's low 32 bits (see the module's notes).
    deadline: u32,
    /// The generation, and [`FAR`] while the deadline is in the far map.
    generation: u32,
}

impl<T> Slot<T> {
    fn generation(&self) -> u32 {
        self.generation & GENERATION_MASK
    }
}

/// A slot's place in its list.
#[derive(Clone, Copy)]
struct Links {
    prev: u32,
    /// The next node of the slot's bucket list, or of the free list while vacant.
    next: u32,
}

impl Links {
    const NONE: Links = Links {
        prev: NIL,
        next: NIL,
    };
}

/// A doubly linked list of nodes, by index.
#[derive(Clone, Copy, Debug)]
pub(crate) struct List {
    head: u32,
    tail: u32,
}

impl List {
    pub(crate) const EMPTY: List = List {
        head: NIL,
        tail: NIL,
    };

    pub(crate) fn is_empty(&self) -> bool {
        self.head == NIL
    }

    pub(crate) fn head(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }
}

pub(crate) struct Arena<T> {
    slots: Vec<Slot<T>>,
    /// The list links of each slot, by the same index.
    links: Vec<Links>,
    /// Head of the list of vacant slots, linked through `next`.
    free: u32,
    /// The deadlines too far from the cursor for 32 bits, by slot.
    far: HashMap<u32, u64>,
    len: usize,
    /// The generation a slot starts with when it is first pushed.
    first_generation: u32,
}

impl<T> Arena<T> {
    pub(crate) fn new() -> Self {
        Arena {
            slots: Vec::new(),
            links: Vec::new(),
            free: NIL,
            far: HashMap::new(),
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

    /// Stores a node that belongs to no list yet, due at `deadline`, which must be at or after
    /// `cursor`. Hands the value back when every index is taken.
    pub(crate) fn insert(&mut self, deadline: u64, cursor: u64, value: T) -> Result<(Key, u32), T> {
        debug_assert!(deadline >= cursor, "a deadline before the cursor");
        let far = deadline - cursor > u64::from(u32::MAX);
        let index = if self.free != NIL {
            let index = self.free;
            let links = &mut self.links[index as usize];
            self.free = links.next;
            *links = Links::NONE;
            let slot = &mut self.slots[index as usize];
            slot.value = Some(value);
            slot.deadline = deadline as u32;
            index
        } else {
            let Ok(index) = u32::try_from(self.slots.len()) else {
                return Err(value);
            };
            if index == NIL {
                return Err(value);
            }
            self.slots.push(Slot {
                value: Some(value),
                deadline: deadline as u32,
                generation: self.first_generation,
            });
            self.links.push(Links::NONE);
            index
        };
        self.len += 1;
        if far {
            self.mark_far(index, deadline);
        }
        let generation = self.slots[index as usize].generation();
        Ok((Key::new(index, generation), index))
    }

    /// The index a key refers to, if its entry is still stored.
    pub(crate) fn resolve(&self, key: Key) -> Option<u32> {
        let slot = self.slots.get(key.index() as usize)?;
        (slot.generation() == key.generation() && slot.value.is_some()).then_some(key.index())
    }

    /// A stored node's deadline, given the cursor (which it is at or after).
    #[inline]
    pub(crate) fn deadline(&self, index: u32, cursor: u64) -> u64 {
        let slot = &self.slots[index as usize];
        if slot.generation & FAR != 0 {
            return self.far_deadline(index);
        }
        near_deadline(slot.deadline, cursor)
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

    /// Takes a node's value out and frees its slot. The node must already be unlinked from its
    /// bucket list. `None` if the slot was vacant.
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
        self.links[index as usize].next = self.free;
        self.free = index;
        self.len -= 1;
        Some((deadline, value))
    }

    pub(crate) fn push_back(&mut self, list: &mut List, index: u32) {
        let tail = list.tail;
        self.links[index as usize] = Links {
            prev: tail,
            next: NIL,
        };
        if tail == NIL {
            list.head = index;
        } else {
            self.links[tail as usize].next = index;
        }
        list.tail = index;
    }

    pub(crate) fn unlink(&mut self, list: &mut List, index: u32) {
        let Links { prev, next } = self.links[index as usize];
        if prev == NIL {
            list.head = next;
        } else {
            self.links[prev as usize].next = next;
        }
        if next == NIL {
            list.tail = prev;
        } else {
            self.links[next as usize].prev = prev;
        }
    }

    pub(crate) fn pop_front(&mut self, list: &mut List) -> Option<u32> {
        let head = list.head()?;
        self.unlink(list, head);
        Some(head)
    }

    /// Moves every node of `src` to the back of `dst` in O(1).
    pub(crate) fn append(&mut self, dst: &mut List, src: &mut List) {
        if src.is_empty() {
            return;
        }
        if dst.is_empty() {
            *dst = *src;
        } else {
            self.links[dst.tail as usize].next = src.head;
            self.links[src.head as usize].prev = dst.tail;
            dst.tail = src.tail;
        }
        *src = List::EMPTY;
    }

    /// Removes every stored value, returning each with the key it had and its deadline. The
    /// caller resets every list that pointed into the arena.
    pub(crate) fn drain(&mut self, cursor: u64) -> Vec<(Key, u64, T)> {
        let mut drained = Vec::with_capacity(self.len);
        for index in 0..self.slots.len() as u32 {
            let generation = self.slots[index as usize].generation();
            if let Some((deadline, value)) = self.remove(index, cursor) {
                drained.push((Key::new(index, generation), deadline, value));
            }
        }
        drained
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_for_a_boxed_closure_is_thirty_two_bytes() {
        let slot = std::mem::size_of::<Slot<Box<dyn FnOnce() + Send>>>();
        assert_eq!(slot + std::mem::size_of::<Links>(), 32);
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
            .map(|&deadline| arena.insert(deadline, cursor, deadline).expect("room"))
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
        assert_eq!(
            arena.remove(far_index, cursor + 7),
            Some((deadlines[3], deadlines[3]))
        );
        assert_eq!(arena.resolve(far_key), None);
        let (again, reused) = arena.insert(cursor + 9, cursor + 8, 0).expect("room");
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
            let (key, index) = arena.insert(round, 0, round).expect("room");
            keys.push(key);
            if round % 2 == 0 {
                arena.remove(index, 0);
            }
        }
        let mut next = arena.succeed();
        for round in 0..10 {
            let (key, index) = next.insert(round, 0, round).expect("room");
            assert!(keys.iter().all(|&old| next.resolve(old).is_none()));
            assert!(!keys.contains(&key));
            next.remove(index, 0);
        }
    }

    #[test]
    fn freed_slots_are_reused_with_a_new_generation() {
        let mut arena = Arena::new();
        let (first, index) = arena.insert(1, 0, "a").expect("room");
        assert_eq!(arena.remove(index, 0), Some((1, "a")));
        assert_eq!(arena.resolve(first), None);
        let (second, reused) = arena.insert(2, 0, "b").expect("room");
        assert_eq!(reused, index);
        assert_ne!(first, second);
        assert_eq!(arena.resolve(second), Some(index));
        assert_eq!(arena.len(), 1);
    }
}
