//! How HTTP clients prove who they are ([`HttpSecurity`]), and the bounded
//! cost of checking Basic credentials ([`BasicCache`]).

use std::sync::Arc;
use std::time::Duration;

use broker::config::HttpAuthMethod;
use broker::security::token::TokenValidator;
use broker::security::Principal;

/// How HTTP clients prove who they are.
#[derive(Debug, Clone)]
pub struct HttpSecurity {
    /// The credentials accepted; `None` = no authentication.
    pub methods: Option<Vec<HttpAuthMethod>>,
    /// The principal of a request without credentials (of every request
    /// without authentication); `None` = such requests are answered 401
    /// (`http.anonymous.principal`).
    pub anonymous: Option<Arc<Principal>>,
    /// Checks bearer tokens, when token keys are configured.
    pub tokens: Option<Arc<TokenValidator>>,
    /// How long a failed authentication waits before its answer.
    pub failed_delay: Duration,
    /// Basic credentials recently verified.
    pub basic: Arc<BasicCache>,
}

impl Default for HttpSecurity {
    /// No authentication, and every request `User:ANONYMOUS`.
    fn default() -> Self {
        HttpSecurity {
            methods: None,
            anonymous: Some(Arc::new(Principal::anonymous())),
            tokens: None,
            failed_delay: Duration::ZERO,
            basic: Arc::default(),
        }
    }
}

/// How long a verified Basic credential is taken without a new key
/// derivation.
const BASIC_CACHE_TTL: Duration = Duration::from_secs(300);
/// Most verified Basic credentials remembered.
const BASIC_CACHE_ENTRIES: usize = 10_000;

/// Basic authentication's costs, bounded: PBKDF2 (deliberately slow) runs
/// at most two at a time on the blocking pool, and a verified credential is
/// remembered for a while by a keyed hash of the user, the password and the
/// stored credential (so a changed or deleted credential is never taken
/// from the cache, and the cache holds no password).
#[derive(Debug)]
pub struct BasicCache {
    pub(crate) derivations: tokio::sync::Semaphore,
    key: [u8; 32],
    verified: parking_lot::Mutex<std::collections::HashMap<[u8; 32], std::time::Instant>>,
}

impl Default for BasicCache {
    fn default() -> Self {
        BasicCache {
            derivations: tokio::sync::Semaphore::new(2),
            key: rand::random(),
            verified: Default::default(),
        }
    }
}

impl BasicCache {
    pub(crate) fn tag(&self, user: &str, password: &str, stored: &[u8]) -> [u8; 32] {
        use hmac::Mac;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.key).expect("any key size");
        for part in [user.as_bytes(), password.as_bytes(), stored] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }

    pub(crate) fn known(&self, tag: &[u8; 32]) -> bool {
        self.verified
            .lock()
            .get(tag)
            .is_some_and(|at| at.elapsed() < BASIC_CACHE_TTL)
    }

    pub(crate) fn remember(&self, tag: [u8; 32]) {
        let mut v = self.verified.lock();
        if v.len() >= BASIC_CACHE_ENTRIES {
            v.retain(|_, at| at.elapsed() < BASIC_CACHE_TTL);
            if v.len() >= BASIC_CACHE_ENTRIES {
                v.clear();
            }
        }
        v.insert(tag, std::time::Instant::now());
    }
}
