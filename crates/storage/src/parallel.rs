//! Running independent file work (one partition each) on a few threads.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Threads for bulk file work: enough to overlap I/O waits on a small
/// machine without flooding a large one.
pub(crate) fn io_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 8)
        * 2
}

/// Puts the calling thread in the `SCHED_IDLE` class: it runs on whatever
/// CPU the request path leaves, and a request thread that wakes up takes
/// the core from it at once. A lower nice value is not enough: the EEVDF
/// scheduler lets a running task finish its slice before a woken one of
/// the same class, and a request crosses several wake-ups (a few
/// milliseconds each with four bulk threads on two cores).
fn yield_to_requests() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: 0 names the calling thread; `param` is a valid pointer.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
        if rc != 0 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "cannot lower the priority of a bulk file thread");
        }
    }
}

/// How bulk threads share the CPU with request handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    /// As any thread (start-up and shutdown, when no requests wait).
    Normal,
    /// Only what requests leave (see [`yield_to_requests`]).
    Background,
}

/// `f` applied to every item on up to `threads` threads; results in the
/// order of `items`.
pub(crate) fn map<T: Send, R: Send>(
    items: Vec<T>,
    threads: usize,
    priority: Priority,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let n = items.len();
    if n <= 1 || threads <= 1 {
        return items.into_iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let inputs: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let outputs: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.min(n) {
            s.spawn(|| {
                if priority == Priority::Background {
                    yield_to_requests();
                }
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    if let Some(item) = inputs[i].lock().take() {
                        *outputs[i].lock() = Some(f(item));
                    }
                }
            });
        }
    });
    outputs
        .into_iter()
        .map(|o| o.into_inner().expect("every item was mapped"))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_order_and_maps_everything() {
        let out = super::map((0..1000).collect(), 8, super::Priority::Normal, |i: u32| {
            i * 2
        });
        assert_eq!(out, (0..1000).map(|i| i * 2).collect::<Vec<_>>());
        assert!(super::map(Vec::<u8>::new(), 4, super::Priority::Background, |i| i).is_empty());
    }
}
