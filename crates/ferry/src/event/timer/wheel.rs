//! [`Wheel`]: a hierarchical timing wheel of intrusive [`Node`]s, ordered
//! by their due tick.
//!
//! This room owns the levels, their slots and occupancy bitmaps, and the
//! list of expired nodes; it must not know what a node belongs to (the
//! entries and their state word are `entry`'s), read a clock (the caller
//! says what time it is, in ticks) or lock anything (its owner holds it
//! under a lock).
//!
//! # Shape
//!
//! [`LEVELS`] levels of [`SLOTS`] slots. A slot of level `l` spans
//! `64^l` ticks, a level `64^(l+1)`: 42 bits of ticks in all. Each level
//! keeps a 64-bit bitmap of its non-empty slots, so the earliest occupied
//! slot of a level is one rotate and one count of trailing zeros, and
//! [`Wheel::next_expiration`] looks at [`LEVELS`] words.
//!
//! A node due at tick `d`, inserted while the wheel's time is `e < d`,
//! goes to the level of the highest bit in which `d` and `e` differ
//! (counted in groups of six), at the slot `d` names in that level's
//! group. So every node of level `l` lies in the same level-`l+1` block as
//! `e`, in a later slot than `e`'s, and every node of a lower level is due
//! before the first slot of any higher level. [`Wheel::advance`] walks the
//! occupied slots in order of their start; a level-0 slot holds only nodes
//! due at its start, which expire; a higher slot is *cascaded*: its nodes
//! go to the expired list if due at its start, else are placed again, now
//! on a lower level, whence they expire in order of their ticks even when
//! the wheel is advanced past the whole slot at once. A node due beyond
//! the top level's reach (2^42 ticks) goes to the top-level slot its tick
//! names; the top level wraps around (its search
//! starts after the current slot, so the current slot means a whole turn
//! ahead), that slot comes round before the node is due, and the node is
//! placed again then.
//!
//! Insert and remove are O(1) (a doubly linked list per slot, and the slot
//! each node sits in); advancing costs O(levels) per occupied slot passed
//! plus O(1) per node moved.

use std::cell::Cell;
use std::ptr::{self, NonNull};

/// Levels of the wheel.
pub(crate) const LEVELS: usize = 7;
/// Slots per level.
pub(crate) const SLOTS: usize = 64;
/// Bits of tick per level.
const BITS: usize = 6;
/// Where a node is when it is in no list.
const NOWHERE: u16 = u16::MAX;
/// Where a node is when it is in the expired list.
const EXPIRED: u16 = (LEVELS * SLOTS) as u16;
/// Ticks the top level reaches beyond the wheel's time.
#[cfg(test)]
const REACH: u64 = 1 << (BITS * LEVELS);

/// The links of one timer, embedded in its entry. Its fields are touched
/// only by the owner of the wheel it is in (or of none).
pub(crate) struct Node {
    due: Cell<u64>,
    prev: Cell<*const Node>,
    next: Cell<*const Node>,
    /// `level * SLOTS + slot`, [`EXPIRED`] or [`NOWHERE`].
    at: Cell<u16>,
}

impl Node {
    /// A node in no wheel.
    pub(crate) const fn new() -> Node {
        Node {
            due: Cell::new(0),
            prev: Cell::new(ptr::null()),
            next: Cell::new(ptr::null()),
            at: Cell::new(NOWHERE),
        }
    }

    /// Whether it is in a wheel.
    pub(crate) fn is_linked(&self) -> bool {
        self.at.get() != NOWHERE
    }
}

impl Default for Node {
    fn default() -> Node {
        Node::new()
    }
}

/// A doubly linked list of nodes, FIFO.
#[derive(Clone, Copy)]
struct List {
    head: *const Node,
    tail: *const Node,
}

impl List {
    const EMPTY: List = List {
        head: ptr::null(),
        tail: ptr::null(),
    };

    fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// # Safety
    /// `n` is live and in no list.
    unsafe fn push_back(&mut self, n: &Node) {
        n.next.set(ptr::null());
        n.prev.set(self.tail);
        if let Some(t) = NonNull::new(self.tail.cast_mut()) {
            // SAFETY: a node in a list is live (the wheel's contract).
            unsafe { t.as_ref() }.next.set(n);
        } else {
            self.head = n;
        }
        self.tail = n;
    }

    /// # Safety
    /// `n` is live and in this list.
    unsafe fn unlink(&mut self, n: &Node) {
        let (prev, next) = (n.prev.get(), n.next.get());
        match NonNull::new(prev.cast_mut()) {
            // SAFETY: its neighbours are in the list, hence live.
            Some(p) => unsafe { p.as_ref() }.next.set(next),
            None => self.head = next,
        }
        match NonNull::new(next.cast_mut()) {
            // SAFETY: as above.
            Some(x) => unsafe { x.as_ref() }.prev.set(prev),
            None => self.tail = prev,
        }
        n.prev.set(ptr::null());
        n.next.set(ptr::null());
    }

    /// # Safety
    /// The list's nodes are live.
    unsafe fn pop_front(&mut self) -> Option<NonNull<Node>> {
        let h = NonNull::new(self.head.cast_mut())?;
        // SAFETY: the head is in the list, hence live.
        unsafe { self.unlink(h.as_ref()) };
        Some(h)
    }
}

/// A hierarchical timing wheel; see the module docs.
pub(crate) struct Wheel {
    /// The wheel's time, in ticks: every node due at or before it is in
    /// the expired list.
    elapsed: u64,
    occupied: [u64; LEVELS],
    slots: [[List; SLOTS]; LEVELS],
    expired: List,
    len: usize,
}

// SAFETY: the wheel reaches its nodes only through `&mut self`, and its
// owner keeps it under a lock; the nodes' contract (`insert`) keeps them
// live and in place while linked.
unsafe impl Send for Wheel {}

impl Default for Wheel {
    fn default() -> Wheel {
        Wheel::new()
    }
}

impl Wheel {
    /// An empty wheel at tick 0.
    pub(crate) const fn new() -> Wheel {
        Wheel {
            elapsed: 0,
            occupied: [0; LEVELS],
            slots: [[List::EMPTY; SLOTS]; LEVELS],
            expired: List::EMPTY,
            len: 0,
        }
    }

    /// The wheel's time, in ticks.
    #[cfg(test)]
    pub(crate) fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// How many nodes it holds (expired ones included).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Links `n`, due at tick `due` (expired at once if `due` is not after
    /// the wheel's time). O(1).
    ///
    /// # Safety
    /// `n` is in no wheel, and stays live and in place until it is out of
    /// this one again ([`Wheel::remove`] or [`Wheel::pop_expired`]).
    pub(crate) unsafe fn insert(&mut self, n: &Node, due: u64) {
        debug_assert!(!n.is_linked());
        n.due.set(due);
        self.len += 1;
        // SAFETY: the caller's contract.
        unsafe { self.place(n) };
    }

    /// Unlinks `n`; false if it was in no wheel. O(1).
    ///
    /// # Safety
    /// `n` is in this wheel or in none.
    pub(crate) unsafe fn remove(&mut self, n: &Node) -> bool {
        let at = n.at.get();
        if at == NOWHERE {
            return false;
        }
        if at == EXPIRED {
            // SAFETY: `at` says which list holds it.
            unsafe { self.expired.unlink(n) };
        } else {
            let (level, slot) = (usize::from(at) / SLOTS, usize::from(at) % SLOTS);
            let list = &mut self.slots[level][slot];
            // SAFETY: as above.
            unsafe { list.unlink(n) };
            if list.is_empty() {
                self.occupied[level] &= !(1 << slot);
            }
        }
        n.at.set(NOWHERE);
        self.len -= 1;
        true
    }

    /// Moves the wheel's time on to `now` (never back): every node due at
    /// or before `now` joins the expired list, in order of its tick (nodes
    /// of one tick in the order they were inserted), however far `now` is
    /// beyond the wheel's time.
    pub(crate) fn advance(&mut self, now: u64) {
        while let Some((level, slot, start)) = self.next_slot() {
            if start > now {
                break;
            }
            self.elapsed = start;
            let mut list = std::mem::replace(&mut self.slots[level][slot], List::EMPTY);
            self.occupied[level] &= !(1 << slot);
            // SAFETY: the nodes of a slot are live (the `insert` contract).
            while let Some(n) = unsafe { list.pop_front() } {
                // SAFETY: as above; it is in no list now.
                unsafe {
                    let n = n.as_ref();
                    // Due at the slot's start: before everything left in
                    // the wheel. Else placed again below, even if due by
                    // `now`: it expires from the lower slots, which this
                    // loop walks in order, so a slot passed whole still
                    // expires its nodes in order of their ticks.
                    if n.due.get() <= start {
                        n.at.set(EXPIRED);
                        self.expired.push_back(n);
                    } else {
                        self.place(n);
                    }
                }
            }
        }
        self.elapsed = self.elapsed.max(now);
    }

    /// Takes the first expired node out of the wheel.
    pub(crate) fn pop_expired(&mut self) -> Option<NonNull<Node>> {
        // SAFETY: the expired list's nodes are live.
        let n = unsafe { self.expired.pop_front() }?;
        // SAFETY: as above.
        unsafe { n.as_ref() }.at.set(NOWHERE);
        self.len -= 1;
        Some(n)
    }

    /// The first tick at which [`Wheel::advance`] has work: the wheel's
    /// time if a node has expired, else the start of the earliest occupied
    /// slot (a node's due tick on level 0, a cascade above); `None` if
    /// the wheel is empty. O(levels).
    pub(crate) fn next_expiration(&self) -> Option<u64> {
        if !self.expired.is_empty() {
            return Some(self.elapsed);
        }
        self.next_slot().map(|(_, _, start)| start)
    }

    /// The occupied slot that starts first: `(level, slot, start)`.
    fn next_slot(&self) -> Option<(usize, usize, u64)> {
        (0..LEVELS)
            .filter_map(|l| self.next_in_level(l).map(|(s, start)| (l, s, start)))
            .min_by_key(|&(_, _, start)| start)
    }

    /// The first occupied slot of `level` after the wheel's time, and its
    /// start.
    fn next_in_level(&self, level: usize) -> Option<(usize, u64)> {
        let occupied = self.occupied[level];
        if occupied == 0 {
            return None;
        }
        let shift = BITS * level;
        let now_slot = (self.elapsed >> shift) as usize % SLOTS;
        // Search from the slot after the wheel's own: below the top level
        // the own slot is never occupied, and on the top level it holds
        // nodes placed a whole turn ahead.
        let from = (now_slot + 1) % SLOTS;
        let slot = (from + occupied.rotate_right(from as u32).trailing_zeros() as usize) % SLOTS;
        let span = 1u64 << (shift + BITS);
        let mut start = (self.elapsed & !(span - 1)) + ((slot as u64) << shift);
        if start <= self.elapsed {
            start += span;
        }
        Some((slot, start))
    }

    /// Puts `n` (in no list, counted in `len`) where it belongs for its
    /// due tick and the wheel's time.
    ///
    /// # Safety
    /// As [`Wheel::insert`].
    unsafe fn place(&mut self, n: &Node) {
        let due = n.due.get();
        if due <= self.elapsed {
            n.at.set(EXPIRED);
            // SAFETY: the caller's contract.
            unsafe { self.expired.push_back(n) };
            return;
        }
        // Beyond the top level's reach, the top-level slot of `due` comes
        // round first: the node is placed again then.
        let level = level_for(self.elapsed, due);
        let slot = (due >> (BITS * level)) as usize % SLOTS;
        n.at.set((level * SLOTS + slot) as u16);
        // SAFETY: the caller's contract.
        unsafe { self.slots[level][slot].push_back(n) };
        self.occupied[level] |= 1 << slot;
    }
}

/// The level of a node placed at tick `place` while the wheel's time is
/// `elapsed < place`: that of the highest differing bit, in groups of
/// [`BITS`] (the top level for anything beyond).
fn level_for(elapsed: u64, place: u64) -> usize {
    let masked = (elapsed ^ place) | (SLOTS as u64 - 1);
    let significant = 63 - masked.leading_zeros() as usize;
    (significant / BITS).min(LEVELS - 1)
}

#[cfg(all(test, not(ferry_loom)))]
#[path = "wheel_tests.rs"]
mod tests;
