//! Where storage file work runs.

/// How the storage runs its file work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoMode {
    /// Off the async workers: the log on a dedicated writer thread (which
    /// also keeps its writes in order), snapshots on `spawn_blocking`.
    #[default]
    Threaded,
    /// On the calling task. Only for deterministic simulations (turmoil),
    /// where a real thread would make the order of events depend on the OS.
    Inline,
}

/// Runs `f` as `mode` says.
pub(crate) async fn run<R, F>(mode: IoMode, f: F) -> std::io::Result<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match mode {
        IoMode::Inline => Ok(f()),
        IoMode::Threaded => tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| std::io::Error::other(format!("storage task failed: {e}"))),
    }
}
