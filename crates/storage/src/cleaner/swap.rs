//! Putting a cleaned segment in place so that a crash at any point leaves a
//! log that opens consistent, and finishing or undoing an interrupted swap
//! when the log is opened.
//!
//! A cleaning replaces consecutive closed segments covering offsets
//! `[B, E)` (based at `B = G0 < G1 < … < Gn`, the next segment based at `E`)
//! with one segment based at `B`. Each step is durable before the next one
//! starts:
//!
//! 1. The cleaned segment is written as `B.log.cleaned`, `B.index.cleaned`
//!    and `B.timeindex.cleaned` and fsynced ([`super::writer`]). A crash
//!    now leaves only `.cleaned` files, which opening deletes: the swap
//!    never happened.
//! 2. **Commit**: the empty marker `B-E.swap` is created and the directory
//!    fsynced. From here on, opening rolls the swap forward.
//! 3. `B.log.cleaned` is renamed over `B.log` (one atomic replace), then
//!    the two index files over theirs; the log replaces the segments in
//!    memory under its lock.
//! 4. The files of `G1 … Gn` are deleted and the directory fsynced, so
//!    no replaced segment can reappear next to the cleaned one.
//! 5. The marker is deleted.
//!
//! Rolling forward a marker `B-E.swap` found at open: `B.log.cleaned`, if
//! still there, replaces `B.log`; every index file of `B` is deleted (the
//! load rebuilds them from the log, whichever renames of step 3 made it to
//! disk); every segment file based in `(B, E)` is deleted; the directory is
//! fsynced; the marker is deleted. Every one of these steps can be repeated,
//! so a crash during recovery is recovered the same way. Kafka's cleaner
//! uses `.cleaned` and `.swap` suffixes for the same reason; the marker
//! names the replaced range exactly, where Kafka infers it from the swap
//! segment's offsets.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use model::Offset;

use crate::checkpoint::sync_dir;
use crate::error::{IoContext, Result};
use crate::segment::{file_name, parse_file_name, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};

/// Suffix of the files of a cleaned segment not yet committed.
pub(crate) const CLEANED_SUFFIX: &str = ".cleaned";
/// Extension of swap markers, `{B:020}-{E:020}.swap`.
const SWAP_EXT: &str = "swap";

/// `{base:020}.{ext}.cleaned`.
pub(crate) fn cleaned_path(dir: &Path, base: Offset, ext: &str) -> PathBuf {
    dir.join(format!("{}{CLEANED_SUFFIX}", file_name(base, ext)))
}

fn marker_path(dir: &Path, base: Offset, end: Offset) -> PathBuf {
    dir.join(format!("{:020}-{:020}.{SWAP_EXT}", base.0, end.0))
}

fn parse_marker(name: &str) -> Option<(Offset, Offset)> {
    let stem = name.strip_suffix(SWAP_EXT)?.strip_suffix('.')?;
    let (b, e) = stem.split_once('-')?;
    let num = |s: &str| {
        (s.len() == 20 && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse().ok().map(Offset))
            .flatten()
    };
    Some((num(b)?, num(e)?))
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).at(path),
    }
}

/// Deletes the (uncommitted) cleaned files of the segment at `base`.
pub(crate) fn discard_cleaned(dir: &Path, base: Offset) -> Result<()> {
    for ext in [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT] {
        remove_if_exists(&cleaned_path(dir, base, ext))?;
    }
    Ok(())
}

/// The steps of a swap at which the crash tests stop it.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The cleaned files are written, nothing committed.
    Written,
    /// The marker is durable.
    Committed,
    /// `B.log.cleaned` replaced `B.log`.
    LogRenamed,
    /// The cleaned indexes replaced `B`'s.
    IndexesRenamed,
    /// The first replaced segment's files are deleted.
    FirstRemoved,
    /// Every replaced segment's files are deleted (and that is durable).
    AllRemoved,
    /// The marker is deleted.
    Finished,
}

#[cfg(test)]
thread_local! {
    static CRASH_AT: std::cell::Cell<Option<Step>> = const { std::cell::Cell::new(None) };
}

/// Makes this thread's next swap stop, as if the process were killed, once
/// it has done `step` (`None`: never).
#[cfg(test)]
pub(crate) fn crash_after(step: Option<Step>) {
    CRASH_AT.with(|c| c.set(step));
}

/// Fails with a simulated crash if the test asked to stop at `step`.
#[cfg(test)]
pub(crate) fn reached(dir: &Path, step: Step) -> Result<()> {
    if CRASH_AT.with(|c| c.get()) == Some(step) {
        return Err(std::io::Error::other(format!(
            "simulated crash after {step:?}"
        )))
        .at(dir);
    }
    Ok(())
}

/// Step 2: makes the swap of `[base, end)` durable.
pub(crate) fn commit(dir: &Path, base: Offset, end: Offset) -> Result<()> {
    #[cfg(test)]
    reached(dir, Step::Written)?;
    let path = marker_path(dir, base, end);
    fs::File::create(&path).at(&path)?;
    // The cleaned files were fsynced when written; this makes the marker
    // (the commit) durable before any old file is touched.
    if let Err(e) = sync_dir(dir) {
        // Not committed after all: take the marker back if possible, so the
        // next open does not roll forward a swap that is being abandoned.
        let _ = remove_if_exists(&path);
        return Err(e);
    }
    #[cfg(test)]
    reached(dir, Step::Committed)?;
    Ok(())
}

/// Step 3: moves the cleaned files of the segment at `base` over its own.
/// The data file goes first: until then the old segment is whole.
pub(crate) fn install(dir: &Path, base: Offset) -> Result<()> {
    let rename = |ext: &str| {
        let from = cleaned_path(dir, base, ext);
        fs::rename(&from, dir.join(file_name(base, ext))).at(&from)
    };
    rename(LOG_EXT)?;
    #[cfg(test)]
    reached(dir, Step::LogRenamed)?;
    rename(INDEX_EXT)?;
    rename(TIME_INDEX_EXT)?;
    #[cfg(test)]
    reached(dir, Step::IndexesRenamed)?;
    Ok(())
}

/// Step 4: deletes the files of the replaced segments after the first.
pub(crate) fn remove_replaced(dir: &Path, bases: &[Offset]) -> Result<()> {
    for base in bases {
        for ext in [
            LOG_EXT,
            INDEX_EXT,
            TIME_INDEX_EXT,
            crate::txn::TXN_INDEX_EXT,
        ] {
            remove_if_exists(&dir.join(file_name(*base, ext)))?;
        }
        #[cfg(test)]
        if Some(base) == bases.first() {
            reached(dir, Step::FirstRemoved)?;
        }
    }
    // Durable before the marker goes: a replaced segment must never be
    // found next to the cleaned one without the marker saying so.
    sync_dir(dir)?;
    #[cfg(test)]
    reached(dir, Step::AllRemoved)?;
    Ok(())
}

/// Step 5: deletes the marker; the swap is complete.
pub(crate) fn finish(dir: &Path, base: Offset, end: Offset) -> Result<()> {
    remove_if_exists(&marker_path(dir, base, end))?;
    #[cfg(test)]
    reached(dir, Step::Finished)?;
    Ok(())
}

/// Whether `dir` holds a swap marker: a swap that failed after its commit,
/// to be finished by the next open.
pub(crate) fn pending(dir: &Path) -> Result<bool> {
    for entry in fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        if entry.file_name().to_str().and_then(parse_marker).is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// What [`recover`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recovered {
    /// Committed swaps completed.
    pub rolled_forward: usize,
    /// Uncommitted cleaned files deleted.
    pub discarded: usize,
}

/// Completes every committed swap found in `dir` and deletes the files of
/// uncommitted ones (see the module docs). Called before a log lists its
/// segments.
pub(crate) fn recover(dir: &Path) -> Result<Recovered> {
    let mut done = Recovered::default();
    let mut markers = Vec::new();
    for entry in fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        if let Some(range) = entry.file_name().to_str().and_then(parse_marker) {
            markers.push(range);
        }
    }
    markers.sort();
    for (base, end) in markers {
        roll_forward(dir, base, end)?;
        done.rolled_forward += 1;
    }
    for entry in fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let cleaned = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.ends_with(CLEANED_SUFFIX));
        if cleaned {
            remove_if_exists(&entry.path())?;
            done.discarded += 1;
        }
    }
    if done.discarded > 0 {
        tracing::info!(dir = %dir.display(), files = done.discarded, "discarded the files of an uncommitted log cleaner swap");
    }
    Ok(done)
}

fn roll_forward(dir: &Path, base: Offset, end: Offset) -> Result<()> {
    tracing::info!(dir = %dir.display(), %base, %end, "completing an interrupted segment swap of the log cleaner");
    let cleaned = cleaned_path(dir, base, LOG_EXT);
    if cleaned.exists() {
        fs::rename(&cleaned, dir.join(file_name(base, LOG_EXT))).at(&cleaned)?;
    }
    for ext in [INDEX_EXT, TIME_INDEX_EXT] {
        remove_if_exists(&dir.join(file_name(base, ext)))?;
        remove_if_exists(&cleaned_path(dir, base, ext))?;
    }
    for entry in fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let segment_base = [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT]
            .iter()
            .find_map(|ext| parse_file_name(&name, ext));
        if segment_base.is_some_and(|b| base < b && b < end) {
            remove_if_exists(&entry.path())?;
        }
    }
    // The replaced segments are gone for good before the marker is.
    sync_dir(dir)?;
    remove_if_exists(&marker_path(dir, base, end))?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_names_round_trip_and_nothing_else_parses() {
        let dir = Path::new("/x");
        let p = marker_path(dir, Offset(7), Offset(1234));
        let name = p.file_name().unwrap().to_str().unwrap();
        assert_eq!(name, "00000000000000000007-00000000000000001234.swap");
        assert_eq!(parse_marker(name), Some((Offset(7), Offset(1234))));
        for bad in [
            "00000000000000000007.swap",
            "7-1234.swap",
            "00000000000000000007-00000000000000001234.snapshot",
            "0000000000000000000a-00000000000000001234.swap",
        ] {
            assert_eq!(parse_marker(bad), None, "{bad}");
        }
        assert!(cleaned_path(dir, Offset(7), LOG_EXT).ends_with("00000000000000000007.log.cleaned"));
    }
}
