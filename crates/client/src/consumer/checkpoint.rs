//! Checkpoints of consumer positions, for stream processors that keep
//! their own state (FLINK-4022).

use std::collections::BTreeMap;

use crate::error::Error;
use crate::message::TopicPartition;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    offset: i64,
    /// Kept from an earlier restore for a partition this instance did not
    /// own when the checkpoint was taken; its owner's position wins.
    carried: bool,
}

/// Positions (the next offset to read) per partition, as
/// [`crate::Consumer::checkpoint`] snapshots them and
/// [`crate::Consumer::restore`] applies them.
///
/// A checkpoint holds the positions of the partitions the consumer owns,
/// plus positions it was restored with for partitions it has not been
/// assigned (yet); those are *carried* so that no position is lost when the
/// assignment differs from the one at snapshot time. To restore a group of
/// instances whose assignment may change, [`Offsets::merge`] the
/// checkpoints of all of them and restore every instance from the result:
/// each applies the positions of whatever partitions it ends up with.
///
/// The text form (one `topic-partition=offset` per entry, space-separated,
/// `~` instead of `=` for carried entries) round-trips through
/// [`std::fmt::Display`] and [`std::str::FromStr`], for storing a
/// checkpoint anywhere.
///
/// ```
/// use magnetar_client::{Offsets, TopicPartition};
/// let mut a = Offsets::new();
/// a.insert(TopicPartition::new("t", 0), 42);
/// let mut b = Offsets::new();
/// b.insert(TopicPartition::new("t", 1), 7);
/// a.merge(b);
/// assert_eq!(a.get(&TopicPartition::new("t", 1)), Some(7));
/// let text = a.to_string();
/// assert_eq!(text, "t-0=42 t-1=7");
/// assert_eq!(text.parse::<Offsets>().unwrap(), a);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Offsets {
    entries: BTreeMap<TopicPartition, Entry>,
}

impl Offsets {
    /// No positions.
    pub fn new() -> Offsets {
        Offsets::default()
    }

    /// Sets the position of `tp` (an owned, not a carried, entry).
    pub fn insert(&mut self, tp: TopicPartition, offset: i64) {
        self.entries.insert(
            tp,
            Entry {
                offset,
                carried: false,
            },
        );
    }

    pub(crate) fn insert_carried(&mut self, tp: TopicPartition, offset: i64) {
        self.entries.insert(
            tp,
            Entry {
                offset,
                carried: true,
            },
        );
    }

    /// The position of `tp`.
    pub fn get(&self, tp: &TopicPartition) -> Option<i64> {
        self.entries.get(tp).map(|e| e.offset)
    }

    /// Whether `tp`'s entry was carried from a restore rather than owned
    /// when the checkpoint was taken.
    pub fn is_carried(&self, tp: &TopicPartition) -> bool {
        self.entries.get(tp).is_some_and(|e| e.carried)
    }

    /// Removes and returns `tp`'s position.
    pub fn remove(&mut self, tp: &TopicPartition) -> Option<i64> {
        self.entries.remove(tp).map(|e| e.offset)
    }

    /// Every (partition, position), sorted by topic and partition.
    pub fn iter(&self) -> impl Iterator<Item = (&TopicPartition, i64)> + '_ {
        self.entries.iter().map(|(tp, e)| (tp, e.offset))
    }

    /// Number of partitions.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds `other`'s entries. Where both have a partition, an owned entry
    /// beats a carried one, and between two of the same kind the larger
    /// offset wins (positions only move forward between checkpoints unless
    /// someone seeks back).
    pub fn merge(&mut self, other: Offsets) {
        for (tp, e) in other.entries {
            match self.entries.get_mut(&tp) {
                None => {
                    self.entries.insert(tp, e);
                }
                Some(mine) => {
                    let take = match (mine.carried, e.carried) {
                        (true, false) => true,
                        (false, true) => false,
                        _ => e.offset > mine.offset,
                    };
                    if take {
                        *mine = e;
                    }
                }
            }
        }
    }
}

impl FromIterator<(TopicPartition, i64)> for Offsets {
    fn from_iter<I: IntoIterator<Item = (TopicPartition, i64)>>(iter: I) -> Self {
        let mut o = Offsets::new();
        for (tp, off) in iter {
            o.insert(tp, off);
        }
        o
    }
}

impl std::fmt::Display for Offsets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (tp, e)) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            let sep = if e.carried { '~' } else { '=' };
            write!(f, "{tp}{sep}{}", e.offset)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Offsets {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let mut o = Offsets::new();
        for item in s.split_whitespace() {
            let bad = || Error::InvalidArgument(format!("bad checkpoint entry {item:?}"));
            let (at, carried) = match (item.rfind('='), item.rfind('~')) {
                (Some(i), None) => (i, false),
                (None, Some(i)) => (i, true),
                _ => return Err(bad()),
            };
            let tp: TopicPartition = item[..at].parse()?;
            let offset: i64 = item[at + 1..].parse().map_err(|_| bad())?;
            o.entries.insert(tp, Entry { offset, carried });
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    #[test]
    fn owned_entries_beat_carried_ones() {
        let mut a = Offsets::new();
        a.insert(tp(0), 50);
        a.insert_carried(tp(1), 10);
        let mut b = Offsets::new();
        b.insert_carried(tp(0), 90);
        b.insert(tp(1), 5);
        b.insert(tp(2), 3);
        a.merge(b);
        assert_eq!(a.get(&tp(0)), Some(50));
        assert!(!a.is_carried(&tp(0)));
        assert_eq!(a.get(&tp(1)), Some(5));
        assert!(!a.is_carried(&tp(1)));
        assert_eq!(a.get(&tp(2)), Some(3));
    }

    #[test]
    fn same_kind_takes_the_larger_offset() {
        let mut a: Offsets = [(tp(0), 5)].into_iter().collect();
        a.merge([(tp(0), 9)].into_iter().collect());
        assert_eq!(a.get(&tp(0)), Some(9));
        a.merge([(tp(0), 2)].into_iter().collect());
        assert_eq!(a.get(&tp(0)), Some(9));
    }

    #[test]
    fn text_round_trips_with_carried_entries() {
        let mut a = Offsets::new();
        a.insert(TopicPartition::new("a-b.c", 0), 1);
        a.insert_carried(TopicPartition::new("a-b.c", 10), 2);
        let s = a.to_string();
        assert_eq!(s, "a-b.c-0=1 a-b.c-10~2");
        assert_eq!(s.parse::<Offsets>().unwrap(), a);
        assert!("t-0:1".parse::<Offsets>().is_err());
        assert!("t-0=x".parse::<Offsets>().is_err());
        assert_eq!("".parse::<Offsets>().unwrap(), Offsets::new());
    }
}
