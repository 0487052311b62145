//! Frames: a 4-byte big-endian length, then a postcard-encoded message.
//! A frame over the size limit or that does not decode is an error, and the
//! caller closes the connection.

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::{ControllerError, Result};

/// Encodes `msg` as one frame.
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

/// Writes `msg` as one frame.
pub(crate) async fn write_frame<W, T>(w: &mut W, msg: &T, max: usize) -> Result<()>
where
    W: AsyncWrite + Unpin + ?Sized,
    T: Serialize,
{
    let buf = encode(msg, max)?;
    w.write_all(&buf).await.map_err(net)?;
    w.flush().await.map_err(net)
}

/// Reads one frame; `None` on a clean end of stream before it.
pub(crate) async fn read_frame<R, T>(r: &mut R, max: usize) -> Result<Option<T>>
where
    R: AsyncRead + Unpin + ?Sized,
    T: DeserializeOwned,
{
    let mut head = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut head[got..]).await.map_err(net)?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(ControllerError::BadFrame(
                    "end of stream in a frame header".into(),
                ))
            };
        }
        got += n;
    }
    let len = u32::from_be_bytes(head) as usize;
    if len > max {
        return Err(ControllerError::BadFrame(format!(
            "frame of {len} bytes over the limit of {max}"
        )));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.map_err(net)?;
    postcard::from_bytes(&body)
        .map(Some)
        .map_err(|e| ControllerError::BadFrame(format!("decode: {e}")))
}

fn net(e: std::io::Error) -> ControllerError {
    ControllerError::Network {
        addr: String::new(),
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trip_and_limits() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        write_frame(&mut a, &("hello".to_string(), 7u64), 1024)
            .await
            .unwrap();
        let got: Option<(String, u64)> = read_frame(&mut b, 1024).await.unwrap();
        assert_eq!(got, Some(("hello".to_string(), 7)));
        // Over the limit: refused before reading the body.
        a.write_all(&(1u32 << 30).to_be_bytes()).await.unwrap();
        let r: Result<Option<(String, u64)>> = read_frame(&mut b, 1024).await;
        assert!(matches!(r, Err(ControllerError::BadFrame(_))));
        // Garbage that does not decode.
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        a.write_all(&[0, 0, 0, 2, 0xff, 0xff]).await.unwrap();
        let r: Result<Option<(String, u64)>> = read_frame(&mut b, 1024).await;
        assert!(matches!(r, Err(ControllerError::BadFrame(_))));
        drop(a);
        let r: Result<Option<(String, u64)>> = read_frame(&mut b, 1024).await;
        assert!(matches!(r, Ok(None)));
    }
}
