//! The key → latest offset map of a cleaning's dirty section, bounded by
//! `log.cleaner.dedupe.buffer.size`.
//!
//! Kafka's `OffsetMap` keeps a 16-byte hash per key, so that two keys
//! with the same hash lose one of their latest values. This map keeps the
//! keys themselves: no collision can remove a record, at the cost of fewer
//! keys per byte of budget (a 16-byte key takes about 70 bytes).

use std::collections::HashMap;

/// Bytes an entry costs beyond its key: the boxed slice, the offset and the
/// table's share (control byte, load factor), rounded up.
const ENTRY_OVERHEAD: usize = 48;

/// The latest offset of every key seen.
#[derive(Debug)]
pub(crate) struct OffsetMap {
    latest: HashMap<Box<[u8]>, i64>,
    bytes: usize,
    budget: usize,
}

impl OffsetMap {
    /// An empty map that counts itself full past `budget` bytes.
    pub fn new(budget: usize) -> OffsetMap {
        OffsetMap {
            latest: HashMap::new(),
            bytes: 0,
            budget,
        }
    }

    /// Records that `key` has a record at `offset` (offsets come in order,
    /// so the last one put is the latest).
    pub fn put(&mut self, key: &[u8], offset: i64) {
        if let Some(o) = self.latest.get_mut(key) {
            *o = (*o).max(offset);
            return;
        }
        self.bytes += key.len() + ENTRY_OVERHEAD;
        self.latest.insert(key.into(), offset);
    }

    /// The latest offset of `key`, if it was seen.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.latest.get(key).copied()
    }

    /// Whether the map used its budget.
    pub fn is_full(&self) -> bool {
        self.bytes >= self.budget
    }

    /// Distinct keys.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.latest.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_offset_and_counts_its_budget() {
        let mut m = OffsetMap::new(3 * (ENTRY_OVERHEAD + 2));
        m.put(b"k1", 5);
        m.put(b"k1", 9);
        m.put(b"k2", 7);
        assert_eq!(
            (m.get(b"k1"), m.get(b"k2"), m.get(b"k3")),
            (Some(9), Some(7), None)
        );
        assert_eq!(m.len(), 2);
        assert!(!m.is_full());
        m.put(b"k1", 12);
        assert!(!m.is_full(), "updates cost nothing");
        m.put(b"k3", 13);
        assert!(m.is_full());
    }
}
