//! The handshake and frame authentication, over in-memory streams.

use std::time::Duration;

use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::codec::{Channel, ReadLimits};
use crate::frame_mac::TAG_BYTES;

fn secret(byte: u8) -> PeerAuth {
    PeerAuth::Secret(ClusterSecret::new(vec![byte; 32]).unwrap())
}

type Outcome = std::result::Result<Session, String>;

/// Runs both sides of a handshake: the client as node `me` expecting
/// `expect`, the server as node 1.
async fn handshake(
    client: &PeerAuth,
    server: &PeerAuth,
    me: Option<NodeId>,
    expect: Option<NodeId>,
) -> (Outcome, Outcome, BoxConn, BoxConn) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (mut a, mut b): (BoxConn, BoxConn) = (Box::new(a), Box::new(b));
    let (c, s) = tokio::join!(
        async {
            let r = connect(&mut a, client, me, expect).await;
            if r.is_err() {
                // As a refusing client does: the server sees the end.
                let _ = a.shutdown().await;
            }
            r
        },
        accept(&mut b, server, 1)
    );
    (c, s, a, b)
}

fn err(o: Outcome) -> String {
    match o {
        Ok(_) => panic!("accepted"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn the_same_secret_gets_through_and_frames_flow_both_ways() {
    let auth = secret(7);
    let (c, s, a, b) = handshake(&auth, &auth, Some(4), Some(1)).await;
    let (c, s) = (c.unwrap(), s.unwrap());
    assert_eq!(c.peer, Some(1), "the client learns the server's id");
    assert_eq!(s.peer, Some(4), "the server learns the client's id");
    let mut client = Channel::new(a, c.keys);
    let mut server = Channel::new(b, s.keys);
    let lim = ReadLimits::caller(1 << 20);
    for i in 0..3u64 {
        client.send(&("req", i), 1 << 20).await.unwrap();
        let (got, _) = server.recv::<(String, u64)>(&lim).await.unwrap().unwrap();
        assert_eq!(got, ("req".to_string(), i));
        server.send(&("resp", i), 1 << 20).await.unwrap();
        let (got, _) = client.recv::<(String, u64)>(&lim).await.unwrap().unwrap();
        assert_eq!(got, ("resp".to_string(), i));
    }
}

#[tokio::test]
async fn without_a_secret_the_hello_names_the_nodes() {
    let (c, s, _, _) = handshake(&PeerAuth::None, &PeerAuth::None, None, None).await;
    let (c, s) = (c.unwrap(), s.unwrap());
    assert!(c.keys.is_none() && s.keys.is_none());
    assert_eq!((c.peer, s.peer), (Some(1), None));
}

#[tokio::test]
async fn a_wrong_secret_is_refused_by_both_sides() {
    // The client checks the server's proof first: it sends nothing more.
    let (c, s, _, _) = handshake(&secret(1), &secret(2), Some(2), None).await;
    assert!(err(c).contains("could not prove"));
    assert!(err(s).contains("closed"));

    // A client that does not check, and sends a proof it cannot make.
    let (a, b) = tokio::io::duplex(1 << 16);
    let (mut a, mut b): (BoxConn, BoxConn) = (Box::new(a), Box::new(b));
    let server = tokio::spawn(async move { accept(&mut b, &secret(2), 1).await });
    let hello = ClientHello {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        secret: true,
        node: Some(2),
        nonce: [9; 32],
    };
    write_small(&mut a, &hello).await.unwrap();
    let _: ServerHello = read_small(&mut a, HANDSHAKE_MAX_FRAME)
        .await
        .unwrap()
        .unwrap();
    write_small(&mut a, &ClientProof { proof: [0; 32] })
        .await
        .unwrap();
    let verdict: Verdict = read_small(&mut a, HANDSHAKE_MAX_FRAME)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(verdict, Verdict::Refused(ref w) if w.contains("wrong cluster secret")));
    assert!(err(server.await.unwrap()).contains("wrong cluster secret"));
}

#[tokio::test]
async fn modes_must_agree() {
    let (c, s, _, _) = handshake(&PeerAuth::None, &secret(1), Some(2), None).await;
    assert!(err(c).contains("requires the cluster secret"));
    assert!(err(s).contains("requires the cluster secret"));
    // A client with the secret sends nothing to a node without one.
    let (c, _, _, _) = handshake(&secret(1), &PeerAuth::None, Some(2), None).await;
    assert!(err(c).contains("does not use a cluster secret"));
}

#[tokio::test]
async fn the_client_refuses_another_node_than_the_one_it_meant() {
    let (c, _, _, _) = handshake(&secret(1), &secret(1), Some(2), Some(3)).await;
    assert!(err(c).contains("not node 3"));
}

#[tokio::test]
async fn strangers_are_refused_at_the_first_frame() {
    for (what, bytes) in [
        (
            "a request frame",
            crate::probe::bare_fetch::<crate::KvMap>(0, 100),
        ),
        ("a 64 MiB size prefix", (64u32 << 20).to_be_bytes().to_vec()),
        (
            "a kilobyte and one",
            ((HANDSHAKE_MAX_FRAME + 1) as u32).to_be_bytes().to_vec(),
        ),
        ("garbage", vec![0, 0, 0, 3, 1, 2, 3]),
    ] {
        let (a, b) = tokio::io::duplex(1 << 16);
        let (mut a, mut b): (Box<tokio::io::DuplexStream>, BoxConn) = (Box::new(a), Box::new(b));
        a.write_all(&bytes).await.unwrap();
        let r = tokio::time::timeout(Duration::from_secs(5), accept(&mut b, &secret(1), 1))
            .await
            .unwrap_or_else(|_| panic!("{what}: not refused at once"));
        let why = err(r);
        assert!(why.contains("not a controller handshake"), "{what}: {why}");
        // Nothing was answered.
        drop(b);
        let mut buf = Vec::new();
        a.read_to_end(&mut buf).await.unwrap();
        assert!(buf.is_empty(), "{what}: answered {buf:?}");
    }
}

#[tokio::test]
async fn a_truncated_handshake_is_refused() {
    let hello = ClientHello {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        secret: true,
        node: Some(2),
        nonce: [1; 32],
    };
    let frame = crate::codec::encode(&hello, HANDSHAKE_MAX_FRAME).unwrap();
    for cut in [2, 4, 10, frame.len() - 1] {
        let (a, b) = tokio::io::duplex(1 << 16);
        let (mut a, mut b): (Box<tokio::io::DuplexStream>, BoxConn) = (Box::new(a), Box::new(b));
        a.write_all(&frame[..cut]).await.unwrap();
        // Cut off: refused once the stream ends.
        a.shutdown().await.unwrap();
        let r = accept(&mut b, &secret(1), 1).await;
        assert!(r.is_err(), "cut at {cut}");
    }
    // Stalled: the caller's deadline ends it (the server bounds it so).
    let (a, b) = tokio::io::duplex(1 << 16);
    let (mut a, mut b): (Box<tokio::io::DuplexStream>, BoxConn) = (Box::new(a), Box::new(b));
    a.write_all(&frame[..10]).await.unwrap();
    let r = tokio::time::timeout(Duration::from_millis(200), accept(&mut b, &secret(1), 1)).await;
    assert!(r.is_err(), "a stalled handshake waits for its deadline");
}

#[tokio::test]
async fn an_older_version_is_told_why() {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (mut a, mut b): (BoxConn, BoxConn) = (Box::new(a), Box::new(b));
    let hello = ClientHello {
        magic: MAGIC,
        version: PROTOCOL_VERSION + 1,
        secret: true,
        node: Some(2),
        nonce: [1; 32],
    };
    write_small(&mut a, &hello).await.unwrap();
    let why = err(accept(&mut b, &secret(1), 1).await);
    assert!(why.contains("version"), "{why}");
    let answer: ServerHello = read_small(&mut a, HANDSHAKE_MAX_FRAME)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(answer, ServerHello::Refused(ref w) if w.contains("version")));
}

/// An authenticated pair, plus a way to see the client's frames as bytes:
/// frames "sent" by `tap` go to `capture` instead of the server, with the
/// client's keys and sequence numbers.
async fn tapped() -> (Channel, BoxConn, Channel, tokio::io::DuplexStream) {
    let auth = secret(5);
    let (c, s, a, b) = handshake(&auth, &auth, Some(2), None).await;
    let (c, s) = (c.unwrap(), s.unwrap());
    let server = Channel::new(b, s.keys);
    let (tap, capture) = tokio::io::duplex(1 << 20);
    (server, a, Channel::new(Box::new(tap), c.keys), capture)
}

async fn frame_bytes(
    tap: &mut Channel,
    capture: &mut tokio::io::DuplexStream,
    msg: &str,
) -> Vec<u8> {
    tap.send(&msg.to_string(), 1 << 20).await.unwrap();
    let len = 4 + postcard::to_stdvec(&msg.to_string()).unwrap().len() + TAG_BYTES;
    let mut buf = vec![0u8; len];
    capture.read_exact(&mut buf).await.unwrap();
    buf
}

async fn server_reads(server: &mut Channel) -> crate::Result<Option<String>> {
    let lim = ReadLimits::caller(1 << 20);
    server.recv::<String>(&lim).await.map(|r| r.map(|(m, _)| m))
}

#[tokio::test]
async fn a_replayed_frame_is_refused() {
    let (mut server, mut raw, mut tap, mut capture) = tapped().await;
    let f = frame_bytes(&mut tap, &mut capture, "delete the topic").await;
    raw.write_all(&f).await.unwrap();
    assert_eq!(
        server_reads(&mut server).await.unwrap().as_deref(),
        Some("delete the topic")
    );
    raw.write_all(&f).await.unwrap();
    assert!(
        matches!(server_reads(&mut server).await, Err(ControllerError::BadFrame(m)) if m.contains("authentication"))
    );
}

#[tokio::test]
async fn reordered_frames_are_refused() {
    let (mut server, mut raw, mut tap, mut capture) = tapped().await;
    let _first = frame_bytes(&mut tap, &mut capture, "one").await;
    let second = frame_bytes(&mut tap, &mut capture, "two").await;
    raw.write_all(&second).await.unwrap();
    assert!(server_reads(&mut server).await.is_err());
}

#[tokio::test]
async fn a_tampered_frame_or_tag_is_refused() {
    for at in [5usize, 8, usize::MAX] {
        let (mut server, mut raw, mut tap, mut capture) = tapped().await;
        let mut f = frame_bytes(&mut tap, &mut capture, "fetch from 0").await;
        let at = at.min(f.len() - 1);
        f[at] ^= 0x01;
        raw.write_all(&f).await.unwrap();
        assert!(
            server_reads(&mut server).await.is_err(),
            "byte {at} flipped"
        );
    }
}

#[test]
fn a_secret_is_at_least_32_bytes_and_never_printed() {
    assert!(ClusterSecret::new(vec![1; 31]).is_err());
    let s = ClusterSecret::new(b"0123456789abcdef0123456789abcdef".to_vec()).unwrap();
    let shown = format!("{s:?} {:?}", PeerAuth::Secret(s.clone()));
    assert!(!shown.contains("0123"), "{shown}");
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short");
    std::fs::write(&short, b"too short").unwrap();
    let e = ClusterSecret::from_file(&short).unwrap_err().to_string();
    assert!(e.contains("short") && e.contains("32"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever a stranger sends first, the server refuses it (or waits
    /// for more, which its deadline ends), and never answers anything
    /// longer than a refusal.
    #[test]
    fn no_bytes_get_a_stranger_in(bytes in proptest::collection::vec(any::<u8>(), 0..1100)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (a, b) = tokio::io::duplex(1 << 16);
            let (mut a, mut b): (Box<tokio::io::DuplexStream>, BoxConn) = (Box::new(a), Box::new(b));
            a.write_all(&bytes).await.unwrap();
            a.shutdown().await.unwrap();
            let r = tokio::time::timeout(Duration::from_secs(5), accept(&mut b, &secret(3), 1)).await;
            let accepted = matches!(r, Ok(Ok(_)));
            prop_assert!(!accepted);
            Ok(())
        })?;
    }

    /// Any one bit flipped anywhere in an authenticated frame is caught.
    #[test]
    fn every_flipped_bit_is_caught(msg in ".{0,64}", bit in 0usize..8, pos in any::<prop::sample::Index>()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (mut server, mut raw, mut tap, mut capture) = tapped().await;
            let mut f = frame_bytes(&mut tap, &mut capture, &msg).await;
            let at = pos.index(f.len());
            f[at] ^= 1 << bit;
            raw.write_all(&f).await.unwrap();
            raw.shutdown().await.unwrap();
            let got = server_reads(&mut server).await;
            prop_assert!(got.is_err(), "flip at {} accepted: {:?}", at, got);
            Ok(())
        })?;
    }
}
