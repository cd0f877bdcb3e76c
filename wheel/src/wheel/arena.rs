//! Node storage for the wheel: a slab of entries addressed by generational keys, threaded into
//! intrusive doubly linked lists (one list per bucket).
//!
//! Indices are `u32` so that a node stays small; [`NIL`] marks the end of a list. A slot's generation
//! is bumped every time its node is removed, so a [`Key`] kept after its entry expired or was
//! cancelled never matches the slot's next occupant.

use slab::Slab;

/// The end of a list.
pub(crate) const NIL: u32 = u32::MAX;

/// Generations count modulo 2^31, so that the top bit of a raw key is free for callers' flags.
const GENERATION_MASK: u32 = u32::MAX >> 1;

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

pub(crate) struct Node<T> {
    pub(crate) value: T,
    pub(crate) deadline: u64,
    prev: u32,
    next: u32,
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
    nodes: Slab<Node<T>>,
    generations: Vec<u32>,
}

impl<T> Arena<T> {
    pub(crate) fn new() -> Self {
        Arena {
            nodes: Slab::new(),
            generations: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Stores a node that belongs to no list yet. Hands the value back when every index is taken.
    pub(crate) fn insert(&mut self, deadline: u64, value: T) -> Result<(Key, u32), T> {
        let entry = self.nodes.vacant_entry();
        let Ok(index) = u32::try_from(entry.key()) else {
            return Err(value);
        };
        if index == NIL {
            return Err(value);
        }
        entry.insert(Node {
            value,
            deadline,
            prev: NIL,
            next: NIL,
        });
        let slot = index as usize;
        if slot == self.generations.len() {
            self.generations.push(0);
        }
        Ok((Key::new(index, self.generations[slot]), index))
    }

    /// The index a key refers to, if its entry is still stored.
    pub(crate) fn resolve(&self, key: Key) -> Option<u32> {
        let index = key.index();
        let live = self.generations.get(index as usize) == Some(&key.generation())
            && self.nodes.contains(index as usize);
        live.then_some(index)
    }

    pub(crate) fn node(&self, index: u32) -> &Node<T> {
        &self.nodes[index as usize]
    }

    /// Takes a node out of storage. It must already be unlinked from its list.
    pub(crate) fn remove(&mut self, index: u32) -> Node<T> {
        let slot = index as usize;
        self.generations[slot] = self.generations[slot].wrapping_add(1) & GENERATION_MASK;
        self.nodes.remove(slot)
    }

    pub(crate) fn push_back(&mut self, list: &mut List, index: u32) {
        let tail = list.tail;
        {
            let node = &mut self.nodes[index as usize];
            node.prev = tail;
            node.next = NIL;
        }
        if tail == NIL {
            list.head = index;
        } else {
            self.nodes[tail as usize].next = index;
        }
        list.tail = index;
    }

    pub(crate) fn unlink(&mut self, list: &mut List, index: u32) {
        let (prev, next) = {
            let node = &self.nodes[index as usize];
            (node.prev, node.next)
        };
        if prev == NIL {
            list.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            list.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
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
            self.nodes[dst.tail as usize].next = src.head;
            self.nodes[src.head as usize].prev = dst.tail;
            dst.tail = src.tail;
        }
        *src = List::EMPTY;
    }

    /// Removes every node, list links and all, returning each with the key it had.
    pub(crate) fn drain(&mut self) -> Vec<(Key, Node<T>)> {
        let indices: Vec<usize> = self.nodes.iter().map(|(index, _)| index).collect();
        let mut drained = Vec::with_capacity(indices.len());
        for slot in indices {
            let key = Key::new(slot as u32, self.generations[slot]);
            drained.push((key, self.remove(slot as u32)));
        }
        drained
    }
}
