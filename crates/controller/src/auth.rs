//! Who may talk to a controller port, and proof that every frame comes
//! from them.
//!
//! Every new connection starts with a handshake before any request. The
//! client names itself (its node id, if it has one) and its mode; the
//! server answers with its own node id.
//!
//! - With a [`ClusterSecret`] ([`PeerAuth::Secret`]) the two sides run a
//!   mutual challenge-response: each sends a fresh 32-byte nonce, and each
//!   proves it knows the secret with an HMAC-SHA256 over both nonces, the
//!   protocol version and both node ids. The server proves first, so a
//!   client never sends anything to an impostor; the client proves next,
//!   so the server serves nobody else. Both then derive one key per
//!   direction from the same transcript, and every frame after the
//!   handshake carries an HMAC-SHA256 over a per-direction sequence number
//!   and the frame: an on-path attacker can neither inject, replay,
//!   reorder nor drop frames unnoticed (it still sees them: confidentiality
//!   is TLS's job).
//! - With [`PeerAuth::None`] the hello only names the node; the transport
//!   must authenticate peers (mutual TLS), or everything must be on
//!   loopback ([`crate::ControllerConfig`] refuses anything else).
//!
//! Before a connection is authenticated its frames are at most
//! [`HANDSHAKE_MAX_FRAME`] bytes, and the server bounds the whole
//! handshake in time, so a stranger holds a connection slot briefly and
//! almost no memory.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use hmac::Mac;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::codec::{read_small, write_small, HANDSHAKE_MAX_FRAME};
use crate::error::{ControllerError, Result};
use crate::frame_mac::{FrameKeys, FrameMac, HmacSha256};
use crate::transport::BoxConn;
use crate::types::NodeId;

/// The shortest cluster secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 32;

/// The controller protocol version this build speaks.
pub const PROTOCOL_VERSION: u16 = 1;

/// The first bytes of every client hello: a peer that sends anything else
/// is not a controller peer of this protocol (or an older node).
const MAGIC: [u8; 8] = *b"MAGNETAR";

/// What each HMAC of the handshake is for (all the same length, so no
/// input of one can be read as another's).
const SERVER_PROOF: &[u8; 16] = b"ctl server proof";
const CLIENT_PROOF: &[u8; 16] = b"ctl client proof";
const KEY_TO_SERVER: &[u8; 16] = b"ctl key c->s    ";
const KEY_TO_CLIENT: &[u8; 16] = b"ctl key s->c    ";

/// The pre-shared secret every node of a cluster knows (the bytes of
/// `controller.cluster.secret.file`). Cheap to clone; never printed.
#[derive(Clone)]
pub struct ClusterSecret(Arc<SecretBytes>);

struct SecretBytes(Box<[u8]>);

impl Drop for SecretBytes {
    fn drop(&mut self) {
        // Best effort: do not leave the secret in freed memory.
        self.0.fill(0);
        std::hint::black_box(&self.0);
    }
}

impl ClusterSecret {
    /// A secret of `bytes`; at least [`MIN_SECRET_BYTES`] of them.
    pub fn new(bytes: Vec<u8>) -> Result<Self> {
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(ControllerError::InvalidConfig(format!(
                "a cluster secret must be at least {MIN_SECRET_BYTES} bytes, this one has {}",
                bytes.len()
            )));
        }
        Ok(ClusterSecret(Arc::new(SecretBytes(
            bytes.into_boxed_slice(),
        ))))
    }

    /// The secret in the file at `path` (all its bytes).
    pub fn from_file(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| ControllerError::io(path, e))?;
        Self::new(bytes).map_err(|e| match e {
            ControllerError::InvalidConfig(why) => {
                ControllerError::InvalidConfig(format!("{}: {why}", path.display()))
            }
            e => e,
        })
    }

    fn bytes(&self) -> &[u8] {
        &self.0 .0
    }
}

impl fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

/// How controller peers authenticate each other (see the module docs).
#[derive(Clone, Debug, Default)]
pub enum PeerAuth {
    /// No proof in the protocol: the transport authenticates peers
    /// (mutual TLS), or every address is loopback.
    #[default]
    None,
    /// The cluster secret: mutual challenge-response, then every frame
    /// authenticated.
    Secret(ClusterSecret),
}

impl PeerAuth {
    fn secret(&self) -> Option<&ClusterSecret> {
        match self {
            PeerAuth::None => None,
            PeerAuth::Secret(s) => Some(s),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct ClientHello {
    magic: [u8; 8],
    version: u16,
    /// Whether the client proves the cluster secret.
    secret: bool,
    /// The client's node id (a broker-only node's too); `None` for a tool.
    node: Option<NodeId>,
    nonce: [u8; 32],
}

#[derive(Serialize, Deserialize)]
enum ServerHello {
    Hello {
        version: u16,
        secret: bool,
        node: NodeId,
        nonce: [u8; 32],
        /// With the secret: the server's proof.
        proof: Option<[u8; 32]>,
    },
    Refused(String),
}

#[derive(Serialize, Deserialize)]
struct ClientProof {
    proof: [u8; 32],
}

#[derive(Serialize, Deserialize)]
enum Verdict {
    Welcome,
    Refused(String),
}

/// What both sides' proofs and keys are computed over.
struct Transcript {
    version: u16,
    client: Option<NodeId>,
    server: NodeId,
    client_nonce: [u8; 32],
    server_nonce: [u8; 32],
}

impl Transcript {
    fn mac(&self, secret: &ClusterSecret, label: &[u8; 16]) -> [u8; 32] {
        let mut m = HmacSha256::new_from_slice(secret.bytes()).expect("HMAC takes any key");
        m.update(label);
        m.update(&MAGIC);
        m.update(&self.version.to_be_bytes());
        match self.client {
            Some(id) => {
                m.update(&[1]);
                m.update(&id.to_be_bytes());
            }
            None => m.update(&[0; 9]),
        }
        m.update(&self.server.to_be_bytes());
        m.update(&self.client_nonce);
        m.update(&self.server_nonce);
        m.finalize().into_bytes().into()
    }

    fn keys(&self, secret: &ClusterSecret, server_side: bool) -> FrameKeys {
        let to_server = FrameMac::new(&self.mac(secret, KEY_TO_SERVER));
        let to_client = FrameMac::new(&self.mac(secret, KEY_TO_CLIENT));
        if server_side {
            FrameKeys {
                send: to_client,
                recv: to_server,
            }
        } else {
            FrameKeys {
                send: to_server,
                recv: to_client,
            }
        }
    }
}

/// What a finished handshake established.
pub(crate) struct Session {
    /// The peer's node id, as its hello named it (proven with the secret
    /// or the transport).
    pub peer: Option<NodeId>,
    /// With the secret: the frame keys.
    pub keys: Option<FrameKeys>,
}

fn nonce() -> [u8; 32] {
    let mut n = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut n);
    n
}

fn equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    bool::from(a.ct_eq(b))
}

/// The serving side of the handshake on an accepted connection of node
/// `me`. `Err` says why the peer is refused (after telling it, where it
/// spoke the protocol); the caller closes the connection and bounds the
/// whole in time.
pub(crate) async fn accept(
    conn: &mut BoxConn,
    auth: &PeerAuth,
    me: NodeId,
) -> std::result::Result<Session, String> {
    let hello: ClientHello = match read_small(conn, HANDSHAKE_MAX_FRAME).await {
        Ok(Some(h)) => h,
        Ok(None) => return Err("closed before its handshake".into()),
        Err(e) => return Err(format!("not a controller handshake: {e}")),
    };
    if hello.magic != MAGIC {
        return Err("not a controller handshake (an older node, or not a controller peer)".into());
    }
    if hello.version != PROTOCOL_VERSION {
        let why = format!(
            "protocol version {} is not spoken here (this node speaks {PROTOCOL_VERSION}); upgrade every node together",
            hello.version
        );
        let _ = write_small(conn, &ServerHello::Refused(why.clone())).await;
        return Err(why);
    }
    let secret = auth.secret();
    if hello.secret != secret.is_some() {
        let why = if secret.is_some() {
            "this controller port requires the cluster secret (controller.security.protocol SASL_PLAINTEXT or SASL_SSL on every node)"
        } else {
            "this controller port does not use a cluster secret: every node of a cluster must use the same controller.security.protocol"
        };
        let _ = write_small(conn, &ServerHello::Refused(why.into())).await;
        return Err(format!("node {:?}: {why}", hello.node));
    }
    let t = Transcript {
        version: PROTOCOL_VERSION,
        client: hello.node,
        server: me,
        client_nonce: hello.nonce,
        server_nonce: nonce(),
    };
    let Some(secret) = secret else {
        let hi = ServerHello::Hello {
            version: PROTOCOL_VERSION,
            secret: false,
            node: me,
            nonce: t.server_nonce,
            proof: None,
        };
        write_small(conn, &hi).await.map_err(|e| e.to_string())?;
        write_small(conn, &Verdict::Welcome)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(Session {
            peer: hello.node,
            keys: None,
        });
    };
    let hi = ServerHello::Hello {
        version: PROTOCOL_VERSION,
        secret: true,
        node: me,
        nonce: t.server_nonce,
        proof: Some(t.mac(secret, SERVER_PROOF)),
    };
    write_small(conn, &hi).await.map_err(|e| e.to_string())?;
    let proof: ClientProof = match read_small(conn, HANDSHAKE_MAX_FRAME).await {
        Ok(Some(p)) => p,
        Ok(None) => return Err(format!("node {:?} closed during its handshake", hello.node)),
        Err(e) => return Err(format!("node {:?}: bad handshake: {e}", hello.node)),
    };
    if !equal(&proof.proof, &t.mac(secret, CLIENT_PROOF)) {
        let why = "wrong cluster secret";
        let _ = write_small(conn, &Verdict::Refused(why.into())).await;
        return Err(format!("node {:?}: {why}", hello.node));
    }
    write_small(conn, &Verdict::Welcome)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Session {
        peer: hello.node,
        keys: Some(t.keys(secret, true)),
    })
}

/// The calling side of the handshake, as node `me` (`None`: not a node),
/// to the node `expect` if known. `Err` says why the connection is not
/// usable (the server refused us, or could not prove itself).
pub(crate) async fn connect(
    conn: &mut BoxConn,
    auth: &PeerAuth,
    me: Option<NodeId>,
    expect: Option<NodeId>,
) -> std::result::Result<Session, String> {
    let secret = auth.secret();
    let client_nonce = nonce();
    let hello = ClientHello {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        secret: secret.is_some(),
        node: me,
        nonce: client_nonce,
    };
    write_small(conn, &hello).await.map_err(|e| e.to_string())?;
    let answer: ServerHello = match read_small(conn, HANDSHAKE_MAX_FRAME).await {
        Ok(Some(a)) => a,
        Ok(None) => return Err("closed during the handshake".into()),
        Err(e) => return Err(format!("bad handshake answer: {e}")),
    };
    let (version, server_secret, node, server_nonce, proof) = match answer {
        ServerHello::Refused(why) => return Err(format!("refused: {why}")),
        ServerHello::Hello {
            version,
            secret,
            node,
            nonce,
            proof,
        } => (version, secret, node, nonce, proof),
    };
    if version != PROTOCOL_VERSION {
        return Err(format!(
            "the controller speaks protocol version {version}, this node {PROTOCOL_VERSION}"
        ));
    }
    if let Some(want) = expect.filter(|&w| w != node) {
        return Err(format!("it is node {node}, not node {want}"));
    }
    let t = Transcript {
        version,
        client: me,
        server: node,
        client_nonce,
        server_nonce,
    };
    let keys = match (secret, server_secret, proof) {
        (None, false, None) => None,
        (Some(secret), true, Some(proof)) => {
            if !equal(&proof, &t.mac(secret, SERVER_PROOF)) {
                return Err(format!(
                    "node {node} could not prove it knows the cluster secret"
                ));
            }
            let mine = ClientProof {
                proof: t.mac(secret, CLIENT_PROOF),
            };
            write_small(conn, &mine).await.map_err(|e| e.to_string())?;
            Some(t.keys(secret, false))
        }
        (Some(_), _, _) => {
            return Err(format!(
                "node {node} does not use the cluster secret: nothing is sent to it"
            ))
        }
        (None, _, _) => return Err(format!("node {node} requires the cluster secret")),
    };
    match read_small::<_, Verdict>(conn, HANDSHAKE_MAX_FRAME).await {
        Ok(Some(Verdict::Welcome)) => Ok(Session {
            peer: Some(node),
            keys,
        }),
        Ok(Some(Verdict::Refused(why))) => Err(format!("refused: {why}")),
        Ok(None) => Err("closed during the handshake".into()),
        Err(e) => Err(format!("bad handshake answer: {e}")),
    }
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
