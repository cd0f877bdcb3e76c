//! One ring of buckets, with an occupancy bitmap that finds the next non-empty bucket without
//! visiting the empty ones. A bucket is a list of `lists.rs`, named by its head node: the
//! level's buckets have consecutive heads.
//!
//! Level 0 has one bucket per tick. Each outer level has 2^[`OUTER_BITS`] = 64 buckets, each covering a
//! whole rotation of the level inside it: the bucket an entry sits in is its remaining round count.

/// log2 of the bucket count of every level above level 0.
pub(crate) const OUTER_BITS: u32 = 6;

pub(crate) struct Level {
    /// Bits of a tick below this level's bucket index.
    shift: u32,
    /// log2 of this level's bucket count.
    bits: u32,
    /// The head node of bucket 0.
    first_head: u32,
    occupied: Box<[u64]>,
}

/// Ticks with the low `bits` bits set, saturating at all ones.
fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

impl Level {
    /// A level of 2^`bits` buckets whose heads are `first_head` and on.
    pub(crate) fn new(shift: u32, bits: u32, first_head: u32) -> Self {
        let slots = 1usize << bits;
        Level {
            shift,
            bits,
            first_head,
            occupied: vec![0; slots.div_ceil(64)].into_boxed_slice(),
        }
    }

    /// How many buckets the level has.
    pub(crate) fn len(&self) -> usize {
        1 << self.bits
    }

    /// The head node of a bucket's list.
    #[inline]
    pub(crate) fn head(&self, slot: usize) -> u32 {
        self.first_head + slot as u32
    }

    /// The bucket whose list `head` is, if it is one of this level's.
    pub(crate) fn slot_of_head(&self, head: u32) -> Option<usize> {
        let slot = head.checked_sub(self.first_head)? as usize;
        (slot < self.len()).then_some(slot)
    }

    /// The bits of a tick that this level and the levels below it resolve.
    pub(crate) fn span_bits(&self) -> u32 {
        self.shift + self.bits
    }

    /// The bucket a deadline falls into on this level.
    pub(crate) fn slot_of(&self, tick: u64) -> usize {
        if self.shift >= 64 {
            return 0;
        }
        ((tick >> self.shift) & low_mask(self.bits)) as usize
    }

    /// The first tick covered by `slot`, in the rotation that `now` is in.
    pub(crate) fn slot_start(&self, now: u64, slot: usize) -> u64 {
        let rotation = now & !low_mask(self.span_bits());
        rotation | ((slot as u64) << self.shift)
    }

    /// Sets the bucket's bit. Writes the word only when the bit was clear: most inserts find it
    /// set, and a store that changes nothing still takes the cache line from other cores.
    pub(crate) fn mark_occupied(&mut self, slot: usize) {
        let word = &mut self.occupied[slot / 64];
        let bit = 1 << (slot % 64);
        if *word & bit == 0 {
            *word |= bit;
        }
    }

    /// Clears the bucket's bit: its list is empty, or about to be taken whole.
    pub(crate) fn mark_empty(&mut self, slot: usize) {
        self.occupied[slot / 64] &= !(1 << (slot % 64));
    }

    /// Clears every bucket's bit.
    pub(crate) fn mark_all_empty(&mut self) {
        self.occupied.fill(0);
    }

    /// The first occupied bucket at or after `from`, without wrapping around.
    pub(crate) fn next_occupied(&self, from: usize) -> Option<usize> {
        let mut word = from / 64;
        let mut bits = *self.occupied.get(word)? & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return Some(word * 64 + bits.trailing_zeros() as usize);
            }
            word += 1;
            bits = *self.occupied.get(word)?;
        }
    }
}
