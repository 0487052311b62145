//! Reads: whole stored batches from one segment, bounded by the high
//! watermark for consumers, the last stable offset for `read_committed`
//! ones, and the log end for follower replicas.

use bytes::Bytes;
use model::Offset;

use super::{Log, ReadResult, RegionRead};
use crate::error::Result;
use crate::segment::{Located, Segment};

/// How far a read may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReadBound {
    /// A `read_committed` consumer: the last stable offset.
    LastStable,
    /// A consumer: the high watermark.
    HighWatermark,
    /// A follower replica: the log end offset.
    LogEnd,
}

impl Log {
    /// Whole batches from the one segment holding `offset`: the batch that
    /// contains `offset` and those after it, at most `max_bytes` in all (but
    /// at least one whole batch if `min_one_batch`, as in KIP-74).
    ///
    /// [`Error::OffsetOutOfRange`] when `offset` is below the log start offset
    /// or above the log end offset; reading at the log end offset returns no
    /// records.
    pub fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult> {
        let found = self.read_region(offset, max_bytes, min_one_batch)?;
        let records = match &found.region {
            Some(region) => region.read_all()?,
            None => Bytes::new(),
        };
        Ok(ReadResult {
            records,
            log_start_offset: found.log_start_offset,
            high_watermark: found.high_watermark,
            last_stable_offset: found.last_stable_offset,
        })
    }

    /// [`Log::read`] without reading the data: where the batches lie in
    /// their segment file, to be sent from there.
    pub fn read_region(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<RegionRead> {
        self.read_region_isolated(offset, max_bytes, min_one_batch, false)
    }

    /// [`Log::read_region`]; with `committed_only` (`read_committed`), no
    /// batch at or after the last stable offset is returned.
    pub fn read_region_isolated(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
        committed_only: bool,
    ) -> Result<RegionRead> {
        let bound = if committed_only {
            ReadBound::LastStable
        } else {
            ReadBound::HighWatermark
        };
        self.read_region_bounded(offset, max_bytes, min_one_batch, bound)
    }

    pub(super) fn read_region_bounded(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
        bound: ReadBound,
    ) -> Result<RegionRead> {
        let mut from = offset;
        loop {
            let (view, later, log_start_offset, high_watermark, lso, limit) = {
                let inner = self.inner.read();
                inner.ensure_readable()?;
                if from == offset
                    && (offset < inner.log_start_offset || offset > inner.log_end_offset)
                {
                    return Err(inner.out_of_range(offset));
                }
                let lso = inner.last_stable_offset();
                let end = match bound {
                    ReadBound::LastStable => lso,
                    ReadBound::HighWatermark => inner.high_watermark(),
                    ReadBound::LogEnd => inner.log_end_offset,
                };
                let (view, later) = if from < end {
                    let i = inner.segment_for(from);
                    let later = inner.segments.get(i + 1).map(Segment::base_offset);
                    (Some(inner.segments[i].view_for_offset(from)?), later)
                } else {
                    (None, None)
                };
                (
                    view,
                    later,
                    inner.log_start_offset,
                    inner.high_watermark(),
                    lso,
                    end,
                )
            };
            // The file is walked without the lock: the view holds its own handle.
            let located = match view {
                Some(view) => view.locate_in(from, max_bytes, min_one_batch, limit)?,
                None => Located::Nothing,
            };
            let (region, next_offset) = match located {
                Located::Found(region, next) => (Some(region), next),
                // Compaction removed the rest of this segment's offsets:
                // the reader continues at the next existing one.
                Located::Nothing if later.is_some_and(|next| next > from) => {
                    from = later.unwrap_or(from);
                    continue;
                }
                Located::Nothing | Located::TooLarge => (None, offset),
            };
            return Ok(RegionRead {
                region,
                next_offset,
                log_start_offset,
                high_watermark,
                last_stable_offset: lso,
            });
        }
    }
}
