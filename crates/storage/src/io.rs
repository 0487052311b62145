//! File I/O the standard library lacks: positioned vectored writes.

use std::fs::File;
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;

/// Linux's limit on iovecs per call (`UIO_MAXIOV`).
const IOV_MAX: usize = 1024;

/// Writes every byte of `bufs`, in order, at `pos` with `pwritev(2)`,
/// retrying after short writes and interruptions.
pub(crate) fn write_all_vectored_at(
    file: &File,
    mut bufs: &mut [IoSlice<'_>],
    mut pos: u64,
) -> io::Result<()> {
    // Skip leading empty slices so an all-empty input ends at once.
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        let count = bufs.len().min(IOV_MAX);
        // SAFETY: IoSlice is ABI-compatible with iovec (guaranteed by std
        // on Unix); the slices are valid for reads for their lengths and
        // `count` does not exceed `bufs.len()`.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                bufs.as_ptr().cast::<libc::iovec>(),
                count as libc::c_int,
                pos as libc::off_t,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev wrote nothing",
            ));
        }
        pos += n as u64;
        IoSlice::advance_slices(&mut bufs, n as usize);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn writes_every_slice_in_order_at_the_position() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        f.write_all_at(b"0123456789", 0).unwrap();
        let parts: Vec<Vec<u8>> = (0..3000).map(|i| vec![(i % 251) as u8; i % 7]).collect();
        let mut slices: Vec<IoSlice> = parts.iter().map(|p| IoSlice::new(p)).collect();
        write_all_vectored_at(&f, &mut slices, 4).unwrap();
        let expected: Vec<u8> = b"0123"
            .iter()
            .copied()
            .chain(parts.iter().flatten().copied())
            .collect();
        let mut got = vec![0u8; expected.len()];
        f.read_exact_at(&mut got, 0).unwrap();
        assert_eq!(got, expected);
    }
}
