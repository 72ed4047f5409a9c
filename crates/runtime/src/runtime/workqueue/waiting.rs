//! The items waiting for their time to be added (client-go's `waitForPriorityQueue` plus its
//! `waitingEntryByData` index).
//!
//! Each item waits at most once. Asking again for an item that is already waiting keeps the
//! earlier of the two times. Items due at the same instant come out in the order they were
//! scheduled.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;
use std::time::Instant;

/// A min-heap of items by ready time, with at most one live entry per item.
///
/// Moving an item earlier pushes a new heap entry and leaves the old one behind; entries that no
/// longer match the index are skipped when they reach the top.
pub(super) struct Waiting<T> {
    heap: BinaryHeap<Reverse<Entry<T>>>,
    /// The live entry of each waiting item: its ready time and sequence number.
    index: HashMap<T, (Instant, u64)>,
    next_seq: u64,
}

struct Entry<T> {
    ready_at: Instant,
    seq: u64,
    item: T,
}

impl<T> Entry<T> {
    fn key(&self) -> (Instant, u64) {
        (self.ready_at, self.seq)
    }
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<T> Eq for Entry<T> {}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl<T: Clone + Eq + Hash> Waiting<T> {
    pub(super) fn new() -> Self {
        Waiting { heap: BinaryHeap::new(), index: HashMap::new(), next_seq: 0 }
    }

    /// Schedules `item` for `ready_at`, unless it already waits for an earlier (or the same) time.
    pub(super) fn insert(&mut self, item: T, ready_at: Instant) {
        if let Some(&(existing, _)) = self.index.get(&item)
            && existing <= ready_at
        {
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.index.insert(item.clone(), (ready_at, seq));
        self.heap.push(Reverse(Entry { ready_at, seq, item }));
    }

    /// Removes and returns the earliest item whose time is at or before `now`.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<T> {
        self.discard_stale();
        if self.heap.peek()?.0.ready_at > now {
            return None;
        }
        let Reverse(entry) = self.heap.pop()?;
        self.index.remove(&entry.item);
        Some(entry.item)
    }

    /// When the earliest waiting item is due.
    pub(super) fn next_ready_at(&mut self) -> Option<Instant> {
        self.discard_stale();
        self.heap.peek().map(|Reverse(entry)| entry.ready_at)
    }

    /// How many distinct items are waiting.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    pub(super) fn clear(&mut self) {
        self.heap.clear();
        self.index.clear();
    }

    /// Pops heap entries superseded by an earlier time for the same item.
    fn discard_stale(&mut self) {
        while let Some(Reverse(top)) = self.heap.peek() {
            if self.index.get(&top.item) == Some(&top.key()) {
                return;
            }
            self.heap.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn drain(waiting: &mut Waiting<&'static str>, now: Instant) -> Vec<&'static str> {
        std::iter::from_fn(|| waiting.pop_due(now)).collect()
    }

    #[test]
    fn pops_due_items_by_time_then_insertion_order() {
        let t0 = Instant::now();
        let mut waiting = Waiting::new();
        waiting.insert("late", t0 + Duration::from_secs(2));
        waiting.insert("b", t0 + Duration::from_secs(1));
        waiting.insert("c", t0 + Duration::from_secs(1));
        waiting.insert("a", t0);
        assert_eq!(waiting.next_ready_at(), Some(t0));
        assert_eq!(drain(&mut waiting, t0 + Duration::from_secs(1)), vec!["a", "b", "c"]);
        assert_eq!(waiting.len(), 1);
        assert_eq!(waiting.next_ready_at(), Some(t0 + Duration::from_secs(2)));
    }

    #[test]
    fn earlier_time_wins() {
        let t0 = Instant::now();
        let mut waiting = Waiting::new();
        waiting.insert("x", t0 + Duration::from_secs(10));
        waiting.insert("x", t0 + Duration::from_secs(1));
        waiting.insert("x", t0 + Duration::from_secs(5));
        assert_eq!(waiting.len(), 1);
        assert_eq!(waiting.next_ready_at(), Some(t0 + Duration::from_secs(1)));
        assert_eq!(drain(&mut waiting, t0 + Duration::from_secs(1)), vec!["x"]);
        // The superseded 10s entry is gone too.
        assert_eq!(waiting.next_ready_at(), None);
        assert_eq!(drain(&mut waiting, t0 + Duration::from_secs(60)), Vec::<&str>::new());
        assert_eq!(waiting.len(), 0);
    }
}
