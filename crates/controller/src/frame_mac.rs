//! Frame authentication after a handshake with the cluster secret: one
//! HMAC-SHA256 key and sequence number per direction ([`crate::auth`]
//! derives the keys).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The MAC of frames and of the handshake's proofs.
pub(crate) type HmacSha256 = Hmac<Sha256>;

/// The size of a frame's authentication tag.
pub(crate) const TAG_BYTES: usize = 32;

/// One direction's frame authentication: a key and the sequence number
/// of the next frame.
pub(crate) struct FrameMac {
    key: HmacSha256,
    seq: u64,
}

impl FrameMac {
    pub(crate) fn new(key: &[u8; 32]) -> Self {
        FrameMac {
            key: HmacSha256::new_from_slice(key).expect("HMAC takes any key"),
            seq: 0,
        }
    }

    fn start(&mut self) -> HmacSha256 {
        let mut m = self.key.clone();
        m.update(&self.seq.to_be_bytes());
        self.seq += 1;
        m
    }

    /// The tag of the next frame, whose bytes are `parts` in order.
    pub(crate) fn tag(&mut self, parts: &[&[u8]]) -> [u8; TAG_BYTES] {
        let mut m = self.start();
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// Whether `tag` is the next frame's for its bytes `parts`
    /// (compared in constant time).
    pub(crate) fn verify(&mut self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let mut m = self.start();
        for p in parts {
            m.update(p);
        }
        m.verify_slice(tag).is_ok()
    }
}

/// A connection's frame keys, one per direction.
pub(crate) struct FrameKeys {
    pub send: FrameMac,
    pub recv: FrameMac,
}
