//! Frames: a 4-byte big-endian length, then a postcard-encoded message;
//! on a connection authenticated with the cluster secret, then a 32-byte
//! HMAC of the frame and its sequence number ([`crate::auth`]). A frame
//! over the size limit, that does not decode, or whose tag does not check
//! is an error, and the caller closes the connection.
//!
//! A frame's bytes are allocated as they arrive, not as its length
//! announces: past a small first part, in growing chunks taken from the
//! port's [`ByteBudget`] (held until the request is answered), so a peer
//! holds what it sent, and all peers together at most the budget.

use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{ControllerError, Result};
use crate::frame_mac::{FrameKeys, TAG_BYTES};
use crate::transport::BoxConn;

/// The largest frame a peer may send before it is authenticated.
pub const HANDSHAKE_MAX_FRAME: usize = 1024;

/// The first part of every frame, read without the budget: small
/// requests (heartbeats, votes, fetches) are always read, whoever holds
/// the budget.
pub(crate) const FREE_BYTES: usize = 64 << 10;

/// The smallest chunk taken from the budget at a time.
const CHUNK_BYTES: usize = 1 << 20;

/// Encodes `msg` as one frame (no tag).
pub(crate) fn encode<T: Serialize>(msg: &T, max: usize) -> Result<Vec<u8>> {
    let mut buf = postcard::to_extend(msg, vec![0u8; 4])
        .map_err(|e| ControllerError::BadFrame(format!("encode: {e}")))?;
    let len = buf.len() - 4;
    if len > max {
        return Err(ControllerError::BadFrame(format!(
            "frame of {len} bytes over the limit of {max}"
        )));
    }
    buf[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(buf)
}

/// Writes `msg` as one untagged frame (the handshake's).
pub(crate) async fn write_small<W, T>(w: &mut W, msg: &T) -> Result<()>
where
    W: AsyncWrite + Unpin + ?Sized,
    T: Serialize,
{
    let buf = encode(msg, HANDSHAKE_MAX_FRAME)?;
    w.write_all(&buf).await.map_err(net)?;
    w.flush().await.map_err(net)
}

/// Reads one untagged frame of at most `max` bytes (the handshake's);
/// `None` on a clean end of stream before it.
pub(crate) async fn read_small<R, T>(r: &mut R, max: usize) -> Result<Option<T>>
where
    R: AsyncRead + Unpin + ?Sized,
    T: DeserializeOwned,
{
    let mut head = [0u8; 4];
    let first = r.read(&mut head).await.map_err(net)?;
    if first == 0 {
        return Ok(None);
    }
    r.read_exact(&mut head[first..]).await.map_err(net)?;
    let len = u32::from_be_bytes(head) as usize;
    if len > max {
        return Err(too_large(len, max));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.map_err(net)?;
    decode(&body).map(Some)
}

fn too_large(len: usize, max: usize) -> ControllerError {
    ControllerError::BadFrame(format!("frame of {len} bytes over the limit of {max}"))
}

fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    postcard::from_bytes(body).map_err(|e| ControllerError::BadFrame(format!("decode: {e}")))
}

fn net(e: std::io::Error) -> ControllerError {
    ControllerError::Network {
        addr: String::new(),
        reason: e.to_string(),
    }
}

/// The bytes of requests a controller port holds at once, over all its
/// connections (`controller.queued.max.request.bytes`).
#[derive(Clone, Debug)]
pub(crate) struct ByteBudget(Arc<Semaphore>);

impl ByteBudget {
    pub(crate) fn new(bytes: usize) -> Self {
        ByteBudget(Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS))))
    }

    async fn take(&self, bytes: usize) -> Result<OwnedSemaphorePermit> {
        let n = u32::try_from(bytes).map_err(|_| too_large(bytes, u32::MAX as usize))?;
        self.0
            .clone()
            .acquire_many_owned(n)
            .await
            .map_err(|_| ControllerError::Shutdown)
    }

    /// Bytes not taken now.
    #[cfg(test)]
    pub(crate) fn available(&self) -> usize {
        self.0.available_permits()
    }
}

/// Budget bytes a frame holds; given back when dropped.
#[derive(Debug, Default)]
pub(crate) struct BudgetPermit(Option<OwnedSemaphorePermit>);

impl BudgetPermit {
    fn merge(&mut self, p: OwnedSemaphorePermit) {
        match &mut self.0 {
            Some(held) => held.merge(p),
            None => self.0 = Some(p),
        }
    }
}

/// Bounds on reading one frame.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadLimits<'a> {
    /// The largest frame.
    pub max: usize,
    /// How long to wait for a frame to start (`None`: as long as it takes).
    pub idle: Option<Duration>,
    /// A started frame that gets no byte for this long is dropped.
    pub stall: Option<Duration>,
    /// A started frame must be whole within this, budget waits included.
    pub total: Option<Duration>,
    /// Where bytes past [`FREE_BYTES`] are taken from.
    pub budget: Option<&'a ByteBudget>,
}

impl ReadLimits<'_> {
    /// Frames up to `max` bytes, no time limits or budget (the caller
    /// bounds the whole exchange).
    pub(crate) fn caller(max: usize) -> ReadLimits<'static> {
        ReadLimits {
            max,
            idle: None,
            stall: None,
            total: None,
            budget: None,
        }
    }
}

async fn within<T>(limit: Option<Duration>, f: impl std::future::Future<Output = T>) -> Option<T> {
    match limit {
        Some(d) => tokio::time::timeout(d, f).await.ok(),
        None => Some(f.await),
    }
}

/// An established connection: its stream and, with the cluster secret,
/// the keys that authenticate its frames.
pub(crate) struct Channel {
    conn: BoxConn,
    keys: Option<FrameKeys>,
}

impl Channel {
    pub(crate) fn new(conn: BoxConn, keys: Option<FrameKeys>) -> Self {
        Channel { conn, keys }
    }

    /// The stream, for bytes outside the protocol (tests of hostile peers).
    pub(crate) fn conn(&mut self) -> &mut BoxConn {
        &mut self.conn
    }

    /// Writes `msg` as one frame (tagged, with keys).
    pub(crate) async fn send<T: Serialize>(&mut self, msg: &T, max: usize) -> Result<()> {
        let mut buf = encode(msg, max)?;
        if let Some(keys) = &mut self.keys {
            let tag = keys.send.tag(&[&buf]);
            buf.extend_from_slice(&tag);
        }
        self.conn.write_all(&buf).await.map_err(net)?;
        self.conn.flush().await.map_err(net)
    }

    /// Reads one frame within `lim`; `None` on a clean end of stream (or
    /// no frame starting within `lim.idle`). The permit holds the frame's
    /// budget bytes: keep it until the request is answered.
    pub(crate) async fn recv<T: DeserializeOwned>(
        &mut self,
        lim: &ReadLimits<'_>,
    ) -> Result<Option<(T, BudgetPermit)>> {
        let mut head = [0u8; 4];
        let first = match within(lim.idle, self.conn.read(&mut head)).await {
            None => return Ok(None),
            Some(r) => r.map_err(net)?,
        };
        if first == 0 {
            return Ok(None);
        }
        let whole = within(lim.total, self.rest(head, first, lim)).await;
        let (body, permit) = whole.ok_or_else(|| {
            ControllerError::BadFrame(format!(
                "a frame did not arrive whole within {:?}",
                lim.total.unwrap_or_default()
            ))
        })??;
        let msg = decode(&body)?;
        Ok(Some((msg, permit)))
    }

    /// The rest of a frame whose first `got` header bytes are in `head`.
    async fn rest(
        &mut self,
        mut head: [u8; 4],
        mut got: usize,
        lim: &ReadLimits<'_>,
    ) -> Result<(Vec<u8>, BudgetPermit)> {
        let stalled = || {
            ControllerError::BadFrame(format!(
                "a frame stopped arriving for {:?}",
                lim.stall.unwrap_or_default()
            ))
        };
        while got < 4 {
            let n = within(lim.stall, self.conn.read(&mut head[got..]))
                .await
                .ok_or_else(stalled)?
                .map_err(net)?;
            if n == 0 {
                return Err(ControllerError::BadFrame(
                    "end of stream in a frame header".into(),
                ));
            }
            got += n;
        }
        let len = u32::from_be_bytes(head) as usize;
        if len > lim.max {
            return Err(too_large(len, lim.max));
        }
        let mut permit = BudgetPermit::default();
        // The frame's whole room is reserved at once: address space only,
        // pages become memory as bytes arrive into them. The budget is
        // taken a chunk at a time before the bytes that fill it are read,
        // so a frame holds in memory what has arrived and never a second,
        // copied-from buffer (growing by reallocation held both at once,
        // half as much again as the budget over many peers).
        let mut body: Vec<u8> = Vec::with_capacity(len);
        let mut taken = len.min(FREE_BYTES);
        while body.len() < len {
            if body.len() == taken {
                let more = (len - taken).min(CHUNK_BYTES);
                if let Some(budget) = lim.budget {
                    permit.merge(budget.take(more).await?);
                }
                taken += more;
            }
            let room = (taken - body.len()) as u64;
            let n = within(lim.stall, (&mut self.conn).take(room).read_buf(&mut body))
                .await
                .ok_or_else(stalled)?
                .map_err(net)?;
            if n == 0 {
                return Err(ControllerError::BadFrame(format!(
                    "end of stream after {} of a frame's {len} bytes",
                    body.len()
                )));
            }
        }
        if let Some(keys) = &mut self.keys {
            let mut tag = [0u8; TAG_BYTES];
            within(lim.stall, self.conn.read_exact(&mut tag))
                .await
                .ok_or_else(stalled)?
                .map_err(net)?;
            if !keys.recv.verify(&[&head, &body], &tag) {
                return Err(ControllerError::BadFrame(
                    "a frame failed its authentication check (changed, replayed or out of order)"
                        .into(),
                ));
            }
        }
        Ok((body, permit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Channel, Channel) {
        let (a, b) = tokio::io::duplex(1 << 16);
        (
            Channel::new(Box::new(a), None),
            Channel::new(Box::new(b), None),
        )
    }

    #[tokio::test]
    async fn round_trip_and_limits() {
        let (mut a, mut b) = pair();
        a.send(&("hello".to_string(), 7u64), 1024).await.unwrap();
        let got = b.recv::<(String, u64)>(&ReadLimits::caller(1024)).await;
        assert_eq!(got.unwrap().unwrap().0, ("hello".to_string(), 7));
        // Over the limit: refused before reading the body.
        a.conn()
            .write_all(&(1u32 << 30).to_be_bytes())
            .await
            .unwrap();
        let r = b.recv::<(String, u64)>(&ReadLimits::caller(1024)).await;
        assert!(matches!(r, Err(ControllerError::BadFrame(_))));
        // Garbage that does not decode.
        let (mut a, mut b) = pair();
        a.conn().write_all(&[0, 0, 0, 2, 0xff, 0xff]).await.unwrap();
        let r = b.recv::<(String, u64)>(&ReadLimits::caller(1024)).await;
        assert!(matches!(r, Err(ControllerError::BadFrame(_))));
        drop(a);
        let r = b.recv::<(String, u64)>(&ReadLimits::caller(1024)).await;
        assert!(matches!(r, Ok(None)));
    }

    #[tokio::test]
    async fn a_frame_takes_the_budget_as_it_arrives_and_gives_it_back() {
        let (a, b) = tokio::io::duplex(1 << 20);
        let (mut a, mut b) = (a, Channel::new(Box::new(b), None));
        let budget = ByteBudget::new(8 << 20);
        let lim = ReadLimits {
            max: 16 << 20,
            idle: None,
            stall: Some(Duration::from_millis(300)),
            total: None,
            budget: Some(&budget),
        };
        // Announces 16 MiB, sends 3 MiB, then stops: only what arrived
        // (rounded up to the next chunk) is taken, and the
        // stalled frame is dropped with its bytes given back.
        let len = 16u32 << 20;
        let sender = tokio::spawn(async move {
            a.write_all(&len.to_be_bytes()).await.unwrap();
            a.write_all(&vec![7u8; 3 << 20]).await.unwrap();
            a
        });
        let watcher = {
            let budget = budget.clone();
            tokio::spawn(async move {
                let mut least = usize::MAX;
                for _ in 0..200 {
                    least = least.min(budget.available());
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                least
            })
        };
        let r = b.recv::<Vec<u8>>(&lim).await;
        assert!(matches!(r, Err(ControllerError::BadFrame(ref m)) if m.contains("stopped")));
        let least = watcher.await.unwrap();
        let taken = (8 << 20) - least;
        assert!(
            (2 << 20..=6 << 20).contains(&taken),
            "took {taken} bytes for 3 MiB"
        );
        assert_eq!(budget.available(), 8 << 20, "given back");
        drop(sender.await.unwrap());
    }

    #[tokio::test]
    async fn small_frames_are_read_while_the_budget_is_taken() {
        let budget = ByteBudget::new(CHUNK_BYTES);
        let _all = budget.take(CHUNK_BYTES).await.unwrap();
        let (mut a, mut b) = pair();
        let lim = ReadLimits {
            max: 16 << 20,
            idle: None,
            stall: None,
            total: Some(Duration::from_secs(5)),
            budget: Some(&budget),
        };
        let small = vec![1u8; FREE_BYTES - 16];
        a.send(&small, 16 << 20).await.unwrap();
        let (got, _permit) = b.recv::<Vec<u8>>(&lim).await.unwrap().unwrap();
        assert_eq!(got, small);
        // A larger one waits for the budget (here: until its deadline).
        let lim = ReadLimits {
            total: Some(Duration::from_millis(200)),
            ..lim
        };
        let (a2, b2) = tokio::io::duplex(4 << 20);
        let (mut a2, mut b2) = (
            Channel::new(Box::new(a2), None),
            Channel::new(Box::new(b2), None),
        );
        a2.send(&vec![1u8; 2 * FREE_BYTES], 16 << 20).await.unwrap();
        let r = b2.recv::<Vec<u8>>(&lim).await;
        assert!(matches!(r, Err(ControllerError::BadFrame(ref m)) if m.contains("whole")));
    }
}
