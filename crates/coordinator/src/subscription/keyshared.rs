//! Key_Shared AUTO_SPLIT hash ranges, as upstream's
//! `HashRangeAutoSplitStickyKeyConsumerSelector`: the first consumer owns
//! the whole range; each newcomer takes the lower half of the largest range;
//! a leaving consumer's range goes to the range above it (or, for the top
//! range, to the range below).

use std::collections::BTreeMap;

use super::ConsumerId;

/// Key hashes are in `0..HASH_RANGE_SIZE` (upstream's `2 << 15`).
pub const HASH_RANGE_SIZE: u32 = 1 << 16;

/// Which consumer owns which key hashes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HashRanges {
    /// Inclusive upper bound of each range → its owner; ranges are
    /// contiguous and cover `0..HASH_RANGE_SIZE` when not empty.
    ranges: BTreeMap<u32, ConsumerId>,
}

impl HashRanges {
    /// Gives `id` a range; false if no range can be split further.
    pub(crate) fn add(&mut self, id: ConsumerId) -> bool {
        if self.ranges.is_empty() {
            self.ranges.insert(HASH_RANGE_SIZE - 1, id);
            return true;
        }
        let mut low = 0;
        let mut best: Option<(u32, u32)> = None;
        for &high in self.ranges.keys() {
            if best.is_none_or(|(l, h)| high - low > h - l) {
                best = Some((low, high));
            }
            low = high + 1;
        }
        let Some((low, high)) = best.filter(|(l, h)| h > l) else {
            return false;
        };
        self.ranges.insert(low + (high - low) / 2, id);
        true
    }

    /// Takes `id`'s range away, merging it into a neighbour.
    pub(crate) fn remove(&mut self, id: ConsumerId) {
        let Some(key) = self.ranges.iter().find(|(_, &c)| c == id).map(|(&k, _)| k) else {
            return;
        };
        self.ranges.remove(&key);
        if key == HASH_RANGE_SIZE - 1 {
            if let Some((&lower, &owner)) = self.ranges.last_key_value() {
                self.ranges.remove(&lower);
                self.ranges.insert(key, owner);
            }
        }
    }

    /// The owner of `hash`.
    pub(crate) fn owner(&self, hash: u32) -> Option<ConsumerId> {
        self.ranges
            .range(hash % HASH_RANGE_SIZE..)
            .next()
            .map(|(_, &c)| c)
    }

    /// Every range as (first, last inclusive, owner).
    #[cfg(test)]
    pub(crate) fn list(&self) -> Vec<(u32, u32, ConsumerId)> {
        let mut low = 0;
        self.ranges
            .iter()
            .map(|(&high, &c)| {
                let r = (low, high, c);
                low = high + 1;
                r
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(n: u64) -> ConsumerId {
        ConsumerId {
            connection: 1,
            consumer: n,
        }
    }

    #[test]
    fn splits_the_largest_range_and_merges_on_leave() {
        let mut r = HashRanges::default();
        r.add(c(1));
        assert_eq!(r.list(), vec![(0, 65535, c(1))]);
        r.add(c(2));
        assert_eq!(r.list(), vec![(0, 32767, c(2)), (32768, 65535, c(1))]);
        r.add(c(3));
        assert_eq!(
            r.list(),
            vec![(0, 16383, c(3)), (16384, 32767, c(2)), (32768, 65535, c(1))]
        );
        assert_eq!(r.owner(20_000), Some(c(2)));
        // A middle range goes to the range above it.
        r.remove(c(2));
        assert_eq!(r.list(), vec![(0, 16383, c(3)), (16384, 65535, c(1))]);
        // The top range goes to the range below it.
        r.remove(c(1));
        assert_eq!(r.list(), vec![(0, 65535, c(3))]);
        r.remove(c(3));
        assert_eq!(r.owner(5), None);
    }
}
