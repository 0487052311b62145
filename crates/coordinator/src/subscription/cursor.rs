//! A subscription's cursor: the mark-delete position (the first offset not
//! yet acknowledged) and the individually acknowledged offsets beyond it,
//! kept as sorted, disjoint, non-adjacent ranges so that millions of acks
//! cost a few map entries. Plus the binary codec of its durable record.

use std::collections::BTreeMap;
use std::ops::Range;

use model::{Offset, Timestamp};

use super::SubscriptionType;
use crate::codec::{put_varint, take_u8, take_varint, unzigzag, zigzag};

/// Acknowledgement state of one subscription on one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    mark_delete: i64,
    /// start → end (exclusive); every start > `mark_delete`, ranges neither
    /// overlap nor touch.
    acked: BTreeMap<i64, i64>,
    acked_count: u64,
}

impl Cursor {
    /// A cursor with nothing acknowledged at or after `mark_delete`.
    pub fn new(mark_delete: Offset) -> Cursor {
        Cursor {
            mark_delete: mark_delete.0,
            acked: BTreeMap::new(),
            acked_count: 0,
        }
    }

    /// The first offset not acknowledged; everything below it is.
    pub fn mark_delete(&self) -> Offset {
        Offset(self.mark_delete)
    }

    /// Whether `offset` is acknowledged.
    pub fn is_acked(&self, offset: Offset) -> bool {
        let o = offset.0;
        if o < self.mark_delete {
            return true;
        }
        self.acked
            .range(..=o)
            .next_back()
            .is_some_and(|(_, &end)| o < end)
    }

    /// Individually acknowledged ranges beyond the mark-delete position, in
    /// order.
    pub fn acked_ranges(&self) -> impl Iterator<Item = Range<Offset>> + '_ {
        self.acked.iter().map(|(&s, &e)| Offset(s)..Offset(e))
    }

    /// How many offsets at or after the mark-delete position are acknowledged.
    pub fn acked_beyond(&self) -> u64 {
        self.acked_count
    }

    /// Acknowledges `range`; returns whether anything changed.
    pub fn ack(&mut self, range: Range<Offset>) -> bool {
        let mut start = range.start.0.max(self.mark_delete);
        let mut end = range.end.0;
        if start >= end {
            return false;
        }
        // Ranges that overlap or touch [start, end) are merged into it.
        let touching: Vec<(i64, i64)> = self
            .acked
            .range(..=end)
            .rev()
            .take_while(|(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        if let [(s, e)] = touching.as_slice() {
            if *s <= start && *e >= end {
                return false;
            }
        }
        for (s, e) in touching {
            self.acked.remove(&s);
            self.acked_count -= (e - s) as u64;
            start = start.min(s);
            end = end.max(e);
        }
        if start == self.mark_delete {
            self.mark_delete = end;
        } else {
            self.acked.insert(start, end);
            self.acked_count += (end - start) as u64;
        }
        true
    }

    /// Acknowledges everything below `offset` (a cumulative ack through
    /// `offset - 1`, or retention having removed it); returns whether
    /// anything changed.
    pub fn ack_below(&mut self, offset: Offset) -> bool {
        if offset.0 <= self.mark_delete {
            return false;
        }
        self.mark_delete = offset.0;
        // Drop ranges now below the mark, absorb one straddling or touching it.
        while let Some((&s, &e)) = self.acked.first_key_value() {
            if s > self.mark_delete {
                break;
            }
            self.acked.remove(&s);
            self.acked_count -= (e - s) as u64;
            self.mark_delete = self.mark_delete.max(e);
        }
        true
    }

    /// Forgets every acknowledgement and puts the mark-delete position at
    /// `offset` (Seek).
    pub fn reset(&mut self, offset: Offset) {
        *self = Cursor::new(offset);
    }

    /// The first `n` offsets not acknowledged below `end` (all of them with
    /// `None`), as ranges in order.
    pub fn unacked(&self, n: Option<u64>, end: Offset) -> Vec<Range<Offset>> {
        let mut left = n.unwrap_or(u64::MAX);
        let mut out = Vec::new();
        let mut take = |from: i64, to: i64, left: &mut u64| {
            let to = to.min(end.0);
            if *left > 0 && to > from {
                let len = ((to - from) as u64).min(*left);
                out.push(Offset(from)..Offset(from + len as i64));
                *left -= len;
            }
        };
        let mut at = self.mark_delete;
        for (&s, &e) in &self.acked {
            if left == 0 || at >= end.0 {
                break;
            }
            take(at, s, &mut left);
            at = e;
        }
        take(at, end.0, &mut left);
        out
    }

    /// Messages not acknowledged below `log_end`.
    pub fn backlog(&self, log_end: Offset) -> u64 {
        let end = log_end.0;
        if end <= self.mark_delete {
            return 0;
        }
        let beyond = match self.acked.last_key_value() {
            Some((_, &e)) if e > end => self
                .acked
                .range(..end)
                .map(|(&s, &e)| (e.min(end) - s) as u64)
                .sum(),
            _ => self.acked_count,
        };
        (end - self.mark_delete) as u64 - beyond
    }
}

/// Most acknowledged ranges a durable record keeps; acks in further ranges
/// stay in memory only (after a restart they are redelivered, which the
/// at-least-once contract allows since they were never persisted).
pub const MAX_PERSISTED_RANGES: usize = 100_000;

const RECORD_VERSION: u8 = 1;

/// A durable subscription as the group log stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorRecord {
    /// The subscription's type.
    pub sub_type: SubscriptionType,
    /// When the subscription was created.
    pub created: Timestamp,
    /// Its cursor.
    pub cursor: Cursor,
}

impl CursorRecord {
    /// The record's bytes: version (1), type, created (zigzag varint),
    /// mark-delete (zigzag varint), range count (varint), then per range
    /// the gap from the previous range's end (or the mark-delete position)
    /// and its length, both varints.
    pub fn encode(&self) -> Vec<u8> {
        let ranges = self.cursor.acked.len().min(MAX_PERSISTED_RANGES);
        let mut out = Vec::with_capacity(24 + ranges * 4);
        out.push(RECORD_VERSION);
        out.push(self.sub_type.code());
        put_varint(&mut out, zigzag(self.created.0));
        put_varint(&mut out, zigzag(self.cursor.mark_delete));
        put_varint(&mut out, ranges as u64);
        let mut prev = self.cursor.mark_delete;
        for (&s, &e) in self.cursor.acked.iter().take(ranges) {
            put_varint(&mut out, (s - prev) as u64);
            put_varint(&mut out, (e - s) as u64);
            prev = e;
        }
        out
    }

    /// Parses [`CursorRecord::encode`]'s bytes; `None` if they are not a
    /// valid record.
    pub fn decode(mut buf: &[u8]) -> Option<CursorRecord> {
        let b = &mut buf;
        if take_u8(b)? != RECORD_VERSION {
            return None;
        }
        let sub_type = SubscriptionType::from_code(take_u8(b)?)?;
        let created = Timestamp(unzigzag(take_varint(b)?));
        let mark_delete = unzigzag(take_varint(b)?);
        let n = take_varint(b)?;
        let mut cursor = Cursor::new(Offset(mark_delete));
        let mut prev = mark_delete;
        for _ in 0..n {
            let gap = i64::try_from(take_varint(b)?).ok()?;
            let len = i64::try_from(take_varint(b)?).ok()?;
            let s = prev.checked_add(gap)?;
            let e = s.checked_add(len)?;
            // Well-formed records have gaps ≥ 1 and lengths ≥ 1; `ack`
            // normalizes anything else rather than trusting it.
            cursor.ack(Offset(s)..Offset(e));
            prev = e;
        }
        if !b.is_empty() {
            return None;
        }
        Some(CursorRecord {
            sub_type,
            created,
            cursor,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn ranges(c: &Cursor) -> Vec<(i64, i64)> {
        c.acked_ranges().map(|r| (r.start.0, r.end.0)).collect()
    }

    #[test]
    fn individual_acks_merge_and_advance_the_mark() {
        let mut c = Cursor::new(Offset(10));
        assert!(c.ack(Offset(12)..Offset(13)));
        assert!(c.ack(Offset(14)..Offset(16)));
        assert_eq!(ranges(&c), vec![(12, 13), (14, 16)]);
        assert_eq!(c.backlog(Offset(20)), 10 - 3);
        // Filling the hole between the ranges merges them.
        assert!(c.ack(Offset(13)..Offset(14)));
        assert_eq!(ranges(&c), vec![(12, 16)]);
        assert!(!c.ack(Offset(12)..Offset(15)), "already acked");
        assert!(!c.ack(Offset(3)..Offset(9)), "below the mark");
        // Acking the mark itself swallows the range.
        assert!(c.ack(Offset(10)..Offset(12)));
        assert_eq!(c.mark_delete(), Offset(16));
        assert!(ranges(&c).is_empty());
        assert_eq!(c.backlog(Offset(20)), 4);
        assert!(c.is_acked(Offset(15)) && !c.is_acked(Offset(16)));
    }

    #[test]
    fn cumulative_ack_absorbs_ranges() {
        let mut c = Cursor::new(Offset(0));
        c.ack(Offset(5)..Offset(8));
        c.ack(Offset(20)..Offset(30));
        c.ack(Offset(40)..Offset(41));
        assert!(c.ack_below(Offset(20)));
        assert_eq!(c.mark_delete(), Offset(30));
        assert_eq!(ranges(&c), vec![(40, 41)]);
        assert_eq!(c.acked_beyond(), 1);
        assert!(!c.ack_below(Offset(25)));
        assert_eq!(c.backlog(Offset(35)), 5, "ranges past the end not counted");
        assert_eq!(c.backlog(Offset(50)), 19);
    }

    #[test]
    fn a_million_acks_in_every_other_offset_are_ranges_and_then_one_mark() {
        let mut c = Cursor::new(Offset(0));
        for o in (1..2_000_000).step_by(2) {
            c.ack(Offset(o)..Offset(o + 1));
        }
        assert_eq!(c.acked.len(), 1_000_000);
        for o in (0..2_000_000).step_by(2) {
            c.ack(Offset(o)..Offset(o + 1));
        }
        assert_eq!(c.mark_delete(), Offset(2_000_000));
        assert_eq!(c.acked.len(), 0);
        assert_eq!(c.acked_beyond(), 0);
    }

    #[test]
    fn record_round_trips_and_rejects_garbage() {
        let mut cursor = Cursor::new(Offset(1_000));
        cursor.ack(Offset(1_005)..Offset(1_010));
        cursor.ack(Offset(1 << 40)..Offset((1 << 40) + 3));
        let r = CursorRecord {
            sub_type: SubscriptionType::KeyShared,
            created: Timestamp(1_700_000_000_000),
            cursor,
        };
        let bytes = r.encode();
        assert_eq!(CursorRecord::decode(&bytes), Some(r));
        assert_eq!(CursorRecord::decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(CursorRecord::decode(&[9, 0, 0, 0, 0]), None);
        assert_eq!(CursorRecord::decode(&[]), None);
    }

    proptest! {
        /// The range set equals a plain set of acked offsets, whatever the
        /// order of acks, and survives the codec.
        #[test]
        fn cursor_matches_a_plain_set(
            start in 0i64..20,
            ops in prop::collection::vec((any::<bool>(), 0i64..120, 1i64..12), 0..60),
        ) {
            let mut c = Cursor::new(Offset(start));
            let mut model: std::collections::BTreeSet<i64> = (0..start).collect();
            for (cumulative, at, len) in ops {
                if cumulative {
                    c.ack_below(Offset(at));
                    model.extend(0..at);
                } else {
                    c.ack(Offset(at)..Offset(at + len));
                    model.extend(at..at + len);
                }
            }
            let mark = (0..).find(|o| !model.contains(o)).unwrap();
            prop_assert_eq!(c.mark_delete(), Offset(mark));
            for o in 0..140 {
                prop_assert_eq!(c.is_acked(Offset(o)), model.contains(&o), "offset {}", o);
            }
            let beyond = model.iter().filter(|&&o| o >= mark).count() as u64;
            prop_assert_eq!(c.acked_beyond(), beyond);
            let end = 100;
            let acked_below_end = model.iter().filter(|&&o| o >= mark && o < end).count() as u64;
            prop_assert_eq!(c.backlog(Offset(end)), (end - mark).max(0) as u64 - acked_below_end.min((end - mark).max(0) as u64));
            // The first n unacknowledged offsets below the end, as ranges.
            let unacked: Vec<i64> = (0..end).filter(|o| !model.contains(o)).collect();
            for n in [0u64, 1, 3, 1000] {
                let got: Vec<i64> = c.unacked(Some(n), Offset(end)).into_iter().flat_map(|r| r.start.0..r.end.0).collect();
                prop_assert_eq!(&got, &unacked[..unacked.len().min(n as usize)].to_vec());
            }
            let all: Vec<i64> = c.unacked(None, Offset(end)).into_iter().flat_map(|r| r.start.0..r.end.0).collect();
            prop_assert_eq!(all, unacked);
            // Ranges are disjoint, non-adjacent and beyond the mark.
            let rs = ranges(&c);
            for w in rs.windows(2) {
                prop_assert!(w[0].1 < w[1].0);
            }
            prop_assert!(rs.iter().all(|r| r.0 > mark && r.0 < r.1));
            let rec = CursorRecord { sub_type: SubscriptionType::Shared, created: Timestamp(-5), cursor: c.clone() };
            prop_assert_eq!(CursorRecord::decode(&rec.encode()), Some(rec));
        }
    }
}
