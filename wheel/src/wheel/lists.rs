//! The links that thread the wheel's entries into lists: one list per bucket, and the list of
//! expired entries. Each list is a ring through a head node of its own, so that taking a node out
//! rewrites its two neighbours and nothing else: it needs neither the list's name nor the node's
//! deadline, and it has no first or last case.
//!
//! Nodes are numbered in one space: the heads first (`0..heads`), then one node per slot of the
//! arena (slot `i` is node `heads + i`), so that a link is one `u32` whichever kind of node it
//! points to. The links sit in a vector of their own, 8 bytes a node, beside the arena's slots:
//! the neighbours a node's removal rewrites are anywhere in the arena, and in 8-byte links those
//! writes land in far fewer cache lines than they would in whole slots.

/// The links of a slot's node that is in no list (a slot vacated by a cancel whose node the visit
/// of its bucket took out, or any slot after a drain), and the end of a chain. Never a node: a
/// wheel holds fewer.
const UNLINKED: u32 = u32::MAX - 1;

/// The bytes a slot's node takes.
#[cfg(test)]
pub(crate) const NODE_BYTES: usize = std::mem::size_of::<Links>();

/// A node's neighbours in its ring.
#[derive(Clone, Copy)]
struct Links {
    prev: u32,
    next: u32,
}

/// Nodes taken out of a list together, first to last, each still linked to the next.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chain {
    first: u32,
    last: u32,
}

impl Chain {
    const EMPTY: Chain = Chain {
        first: UNLINKED,
        last: UNLINKED,
    };
}

pub(crate) struct Lists {
    /// The heads' links, then the slots'.
    links: Vec<Links>,
    /// How many lists there are.
    heads: u32,
}

impl Lists {
    /// `heads` empty lists, numbered from 0, and no slot nodes.
    pub(crate) fn new(heads: u32) -> Self {
        Lists {
            links: (0..heads)
                .map(|head| Links {
                    prev: head,
                    next: head,
                })
                .collect(),
            heads,
        }
    }

    #[inline]
    fn node(&self, index: u32) -> usize {
        (self.heads + index) as usize
    }

    /// Whether the list has no node.
    pub(crate) fn is_empty(&self, head: u32) -> bool {
        self.links[head as usize].next == head
    }

    /// Appends slot `index`, which is in no list, to the list `head`. A slot the arena has just
    /// added gets its node here.
    #[inline]
    pub(crate) fn push_back(&mut self, head: u32, index: u32) {
        let node = self.node(index);
        let tail = self.links[head as usize].prev;
        let links = Links {
            prev: tail,
            next: head,
        };
        if node < self.links.len() {
            self.links[node] = links;
        } else {
            debug_assert_eq!(node, self.links.len(), "slots are added one at a time");
            if self.links.len() == self.links.capacity() {
                // Room for as many slots' nodes again, as the arena's slots grow: doubling the
                // whole vector would count the heads in, and keep that much more room.
                let nodes = self.links.len() - self.heads as usize;
                self.links.reserve_exact(nodes.max(4));
            }
            self.links.push(links);
        }
        self.links[tail as usize].next = node as u32;
        self.links[head as usize].prev = node as u32;
    }

    /// Takes slot `index`'s node out of its list. Returns the list's head if the list is empty
    /// now.
    #[inline]
    pub(crate) fn unlink(&mut self, index: u32) -> Option<u32> {
        let Links { prev, next } = self.links[self.node(index)];
        self.links[prev as usize].next = next;
        self.links[next as usize].prev = prev;
        // Only the head is its own neighbour on both sides, in an empty ring.
        (prev == next).then_some(prev)
    }

    /// Takes the first node out of the list `head`, as a slot index.
    #[inline]
    pub(crate) fn pop_front(&mut self, head: u32) -> Option<u32> {
        let first = self.links[head as usize].next;
        if first == head {
            return None;
        }
        let index = first - self.heads;
        self.unlink(index);
        Some(index)
    }

    /// Takes every node out of the list `head` at once, as a chain.
    pub(crate) fn take(&mut self, head: u32) -> Chain {
        let Links {
            prev: last,
            next: first,
        } = self.links[head as usize];
        if first == head {
            return Chain::EMPTY;
        }
        self.links[head as usize] = Links {
            prev: head,
            next: head,
        };
        Chain { first, last }
    }

    /// Takes the first node off a chain, as a slot index. The node's own links are stale until
    /// it is pushed onto a list or marked unlinked.
    #[inline]
    pub(crate) fn chain_pop(&mut self, chain: &mut Chain) -> Option<u32> {
        let node = chain.first;
        if node == UNLINKED {
            return None;
        }
        chain.first = if node == chain.last {
            UNLINKED
        } else {
            self.links[node as usize].next
        };
        Some(node - self.heads)
    }

    /// Appends a whole chain to the list `head` in O(1).
    pub(crate) fn append(&mut self, head: u32, chain: Chain) {
        if chain.first == UNLINKED {
            return;
        }
        let tail = self.links[head as usize].prev;
        self.links[tail as usize].next = chain.first;
        self.links[chain.first as usize].prev = tail;
        self.links[chain.last as usize].next = head;
        self.links[head as usize].prev = chain.last;
    }

    /// Marks slot `index`'s node, just taken out of its list by a visit, as in no list.
    #[inline]
    pub(crate) fn mark_unlinked(&mut self, index: u32) {
        let node = self.node(index);
        self.links[node].prev = UNLINKED;
    }

    /// Whether slot `index`'s node, vacated by a cancel, is still in a list.
    #[inline]
    pub(crate) fn is_linked(&self, index: u32) -> bool {
        self.links[self.node(index)].prev != UNLINKED
    }

    /// Empties every list, marking every slot's node as in none.
    pub(crate) fn clear(&mut self) {
        for (node, links) in self.links.iter_mut().enumerate() {
            *links = match u32::try_from(node) {
                Ok(head) if head < self.heads => Links {
                    prev: head,
                    next: head,
                },
                _ => Links {
                    prev: UNLINKED,
                    next: UNLINKED,
                },
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(lists: &Lists, head: u32) -> Vec<u32> {
        let mut seen = Vec::new();
        let mut node = lists.links[head as usize].next;
        while node != head {
            seen.push(node - lists.heads);
            node = lists.links[node as usize].next;
        }
        seen
    }

    #[test]
    fn a_removal_says_when_it_empties_its_list() {
        let mut lists = Lists::new(3);
        for index in 0..4 {
            lists.push_back(index % 2 + 1, index);
        }
        assert_eq!(walk(&lists, 1), vec![0, 2]);
        assert_eq!(walk(&lists, 2), vec![1, 3]);
        assert_eq!(lists.unlink(2), None);
        assert_eq!(lists.unlink(0), Some(1), "list 1 is empty now");
        assert!(lists.is_empty(1));
        assert_eq!(lists.pop_front(2), Some(1));
        assert_eq!(lists.pop_front(2), Some(3));
        assert_eq!(lists.pop_front(2), None);
        assert!((0..3).all(|head| lists.is_empty(head)));
    }

    #[test]
    fn a_chain_taken_whole_comes_off_in_order_and_appends_in_one_step() {
        let mut lists = Lists::new(2);
        for index in 0..5 {
            lists.push_back(1, index);
        }
        lists.push_back(0, 5);
        let chain = lists.take(1);
        assert!(lists.is_empty(1));
        lists.append(0, chain);
        assert_eq!(walk(&lists, 0), vec![5, 0, 1, 2, 3, 4]);
        let mut chain = lists.take(0);
        let mut popped = Vec::new();
        while let Some(index) = lists.chain_pop(&mut chain) {
            popped.push(index);
            if index % 2 == 0 {
                lists.push_back(1, index);
            } else {
                lists.mark_unlinked(index);
            }
        }
        assert_eq!(popped, vec![5, 0, 1, 2, 3, 4]);
        assert_eq!(walk(&lists, 1), vec![0, 2, 4]);
        assert!(!lists.is_linked(3) && lists.is_linked(2));
        lists.append(0, Chain::EMPTY);
        assert!(lists.is_empty(0));
        lists.clear();
        assert!(lists.is_empty(1) && !lists.is_linked(0));
    }
}
