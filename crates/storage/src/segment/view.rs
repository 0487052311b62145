//! Reading a segment's file: walking batch headers and reading whole
//! batches, outside the log's lock.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use model::{Offset, Timestamp};

use crate::batch::{check_stored_batch, BatchHeader, HEADER_LEN};
use crate::error::{corrupt, BatchError, IoContext, Result};
use crate::records::{self, RecordTimestamp};

/// Reads a file region through a buffer, so that walking batch headers costs
/// one syscall per chunk rather than one per batch.
pub(crate) struct ChunkReader<'a> {
    file: &'a File,
    path: &'a Path,
    end: u64,
    start: u64,
    buf: Vec<u8>,
    chunk: usize,
}

/// Read size for sequential scans (recovery, replay, timestamp search).
const SCAN_CHUNK: usize = 64 * 1024;
/// Read size when locating a fetch's first batch: the target is usually
/// within one index interval of the indexed position.
const SEEK_CHUNK: usize = 8 * 1024;

impl<'a> ChunkReader<'a> {
    /// A reader of `file` up to byte `end`, reading `chunk` bytes at a time.
    pub fn new(file: &'a File, path: &'a Path, end: u64, chunk: usize) -> Self {
        ChunkReader {
            file,
            path,
            end,
            start: 0,
            buf: Vec::new(),
            chunk,
        }
    }

    /// Up to `len` bytes from `pos` (fewer only at `end`).
    pub fn get(&mut self, pos: u64, len: usize) -> Result<&[u8]> {
        let have = pos >= self.start && pos + len as u64 <= self.start + self.buf.len() as u64;
        if !have {
            let want = (self.end.saturating_sub(pos)).min(len.max(self.chunk) as u64) as usize;
            self.buf.resize(want, 0);
            let mut filled = 0;
            while filled < want {
                let n = self
                    .file
                    .read_at(&mut self.buf[filled..], pos + filled as u64)
                    .at(self.path)?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            self.buf.truncate(filled);
            self.start = pos;
        }
        let from = (pos - self.start) as usize;
        let to = (from + len).min(self.buf.len());
        Ok(&self.buf[from..to])
    }
}

/// Where a walk over a segment's batches ended.
#[derive(Debug)]
pub(crate) struct ScanEnd {
    /// Position just after the last good batch visited.
    pub position: u64,
    /// Why the walk stopped before `end`, if it hit bad bytes.
    pub invalid: Option<BatchError>,
}

/// Walks the batches of `file` in `[start, end)`, calling `f` with each
/// batch's position, header and bytes (with `check_crc`, only after
/// verifying its CRC and record count; without, the bytes of control
/// batches only, the others' are empty). Stops at the first bad batch or when `f`
/// returns `false`.
pub(crate) fn scan(
    file: &File,
    path: &Path,
    start: u64,
    end: u64,
    check_crc: bool,
    f: impl FnMut(u64, &BatchHeader, &[u8]) -> Result<bool>,
) -> Result<ScanEnd> {
    scan_chunked(file, path, start, end, check_crc, SCAN_CHUNK, f)
}

fn scan_chunked(
    file: &File,
    path: &Path,
    start: u64,
    end: u64,
    check_crc: bool,
    chunk: usize,
    mut f: impl FnMut(u64, &BatchHeader, &[u8]) -> Result<bool>,
) -> Result<ScanEnd> {
    let mut reader = ChunkReader::new(file, path, end, chunk);
    let mut pos = start;
    while pos < end {
        let head = reader.get(pos, HEADER_LEN)?;
        let header = match BatchHeader::parse_at(head, pos as usize) {
            Ok(h) => h,
            Err(e) => {
                return Ok(ScanEnd {
                    position: pos,
                    invalid: Some(e),
                })
            }
        };
        let size = header.total_size();
        if pos + size as u64 > end {
            return Ok(ScanEnd {
                position: pos,
                invalid: Some(BatchError::Truncated {
                    position: pos as usize,
                    needed: size,
                    available: (end - pos) as usize,
                }),
            });
        }
        let body: &[u8] = if check_crc {
            let body = reader.get(pos, size)?;
            if let Err(e) = check_stored_batch(body, &header, pos as usize) {
                return Ok(ScanEnd {
                    position: pos,
                    invalid: Some(e),
                });
            }
            body
        } else if header.is_control() {
            // Markers are read even without CRC checks: a control batch is
            // small, and producer state replay needs what it says.
            reader.get(pos, size)?
        } else {
            &[]
        };
        if !f(pos, &header, body)? {
            return Ok(ScanEnd {
                position: pos,
                invalid: None,
            });
        }
        pos += size as u64;
    }
    Ok(ScanEnd {
        position: pos,
        invalid: None,
    })
}

/// Whole stored batches in a segment file, to be sent without going
/// through the heap in one piece: the file stays readable (even after
/// retention deletes it) while the region is held.
#[derive(Debug, Clone)]
pub struct FileRegion {
    file: Arc<File>,
    path: PathBuf,
    position: u64,
    len: usize,
}

impl FileRegion {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads `buf.len()` bytes starting `at` bytes into the region.
    pub fn read_at(&self, at: usize, buf: &mut [u8]) -> Result<()> {
        debug_assert!(at + buf.len() <= self.len);
        self.file
            .read_exact_at(buf, self.position + at as u64)
            .at(&self.path)
    }

    /// The file and the byte range in it, to send it with `sendfile(2)`.
    pub fn file_range(&self) -> (&File, u64, usize) {
        (&self.file, self.position, self.len)
    }

    /// The whole region in memory.
    pub fn read_all(&self) -> Result<Bytes> {
        let mut buf = vec![0u8; self.len];
        self.read_at(0, &mut buf)?;
        Ok(Bytes::from(buf))
    }
}

/// What [`SegmentView::locate_in`] found.
#[derive(Debug)]
pub(crate) enum Located {
    /// The batches to send and the offset after the last of them.
    Found(FileRegion, Offset),
    /// The first batch at or after the offset is larger than allowed.
    TooLarge,
    /// No batch at or after the offset in this segment.
    Nothing,
}

/// What a reader needs from a segment, taken under the log's lock so the
/// actual I/O can happen outside it.
#[derive(Debug, Clone)]
pub(crate) struct SegmentView {
    pub file: Arc<File>,
    pub path: PathBuf,
    /// Where to start walking batches.
    pub start: u64,
    /// Committed size of the file.
    pub end: u64,
}

impl SegmentView {
    /// Where the whole batches holding offsets `>= offset` lie in the file,
    /// starting with the batch that contains `offset`, at most `max_bytes`
    /// (but one whole batch when `min_one_batch`); found by walking batch
    /// headers only, with the offset after the last batch in it. `None`
    /// when there are none to send.
    pub fn locate(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<Option<(FileRegion, Offset)>> {
        Ok(
            match self.locate_in(offset, max_bytes, min_one_batch, Offset(i64::MAX))? {
                Located::Found(region, next) => Some((region, next)),
                Located::TooLarge | Located::Nothing => None,
            },
        )
    }

    /// [`SegmentView::locate`], telling apart a first batch too large for
    /// `max_bytes` from no batch at or after `offset` in this segment (a
    /// compacted segment may end before the next one begins). Batches from
    /// `limit` on are left out (a `read_committed` read stops at the last
    /// stable offset).
    pub fn locate_in(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
        limit: Offset,
    ) -> Result<Located> {
        let mut too_large = false;
        let mut first: Option<u64> = None;
        let mut end = 0u64;
        let mut next_offset = offset;
        let scanned = scan_chunked(
            &self.file,
            &self.path,
            self.start,
            self.end,
            false,
            SEEK_CHUNK,
            |pos, h, _| {
                let next = pos + h.total_size() as u64;
                if h.base_offset >= limit {
                    return Ok(false);
                }
                match first {
                    None if h.last_offset() < offset => Ok(true),
                    None => {
                        if h.total_size() > max_bytes && !min_one_batch {
                            too_large = true;
                            return Ok(false);
                        }
                        first = Some(pos);
                        end = next;
                        next_offset = h.last_offset().plus(1);
                        Ok(true)
                    }
                    // Only whole batches go out, at most max_bytes of them.
                    Some(start) if next - start > max_bytes as u64 => Ok(false),
                    Some(_) => {
                        end = next;
                        next_offset = h.last_offset().plus(1);
                        Ok(true)
                    }
                }
            },
        )?;
        if let Some(e) = scanned.invalid {
            // A bad batch after what is being sent is reported by the read
            // that reaches it.
            if first.is_none() || scanned.position < end {
                return Err(corrupt(&self.path, format!("bad batch while reading: {e}")));
            }
        }
        Ok(match first {
            Some(start) => {
                let region = FileRegion {
                    file: Arc::clone(&self.file),
                    path: self.path.clone(),
                    position: start,
                    len: (end - start) as usize,
                };
                Located::Found(region, next_offset)
            }
            None if too_large => Located::TooLarge,
            None => Located::Nothing,
        })
    }

    /// Calls `f` with each whole batch (bytes) whose last offset is
    /// `>= min_offset` and for which `want` accepts the header, in order,
    /// until `f` returns `Some`.
    pub fn find_in_batches<T>(
        &self,
        min_offset: Offset,
        want: impl Fn(&BatchHeader) -> bool,
        mut f: impl FnMut(&[u8]) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let mut result = None;
        let scanned = scan(
            &self.file,
            &self.path,
            self.start,
            self.end,
            true,
            |_, h, body| {
                if h.last_offset() >= min_offset && want(h) {
                    result = f(body)?;
                }
                Ok(result.is_none())
            },
        )?;
        if let Some(e) = scanned.invalid {
            return Err(corrupt(
                &self.path,
                format!("bad batch while searching: {e}"),
            ));
        }
        Ok(result)
    }
}

/// The first record with offset `>= min_offset` and timestamp `>= target` in
/// the segment the view was taken from.
pub(crate) fn find_timestamp_in(
    view: &SegmentView,
    target: Timestamp,
    min_offset: Offset,
) -> Result<Option<RecordTimestamp>> {
    view.find_in_batches(
        min_offset,
        |h| h.max_timestamp >= target,
        |body| {
            Ok(records::find_offset_for_timestamp(
                body, target, min_offset,
            )?)
        },
    )
}
