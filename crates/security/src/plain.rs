//! SASL PLAIN (RFC 4616), the server side: `[authzid] NUL authcid NUL
//! password`, checked against the user's stored SCRAM credential (the
//! broker keeps no password, only its salted hash). Unknown users cost the
//! same key derivation as known ones, so timing tells them apart no better
//! than the answer does.

use super::scram::{ScramCredential, ScramMechanism, MIN_ITERATIONS};
use super::{AuthError, Principal};

/// Longest PLAIN message accepted (a name and a password, with room).
pub const MAX_MESSAGE: usize = 4096;

/// Checks a PLAIN message; the principal of its user on success.
pub fn authenticate(
    message: &[u8],
    lookup: &dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>,
) -> Result<Principal, AuthError> {
    if message.len() > MAX_MESSAGE {
        return Err(AuthError::Malformed("PLAIN message too long".into()));
    }
    let mut parts = message.split(|b| *b == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Malformed(
            "PLAIN message is not authzid NUL user NUL password".into(),
        ));
    };
    let user = std::str::from_utf8(user)
        .map_err(|_| AuthError::Malformed("PLAIN user name is not UTF-8".into()))?;
    if user.is_empty() || password.is_empty() {
        return Err(AuthError::Malformed(
            "PLAIN user name or password is empty".into(),
        ));
    }
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return Err(AuthError::invalid(format!(
            "user {user:?} asked to act as another identity"
        )));
    }
    verify_password(user, password, lookup)
}

/// Checks `password` against `user`'s stored credential (the strongest
/// SCRAM hash it has), the principal of the user when it matches. PLAIN
/// and HTTP Basic use it; it derives a key: run it off async workers.
pub fn verify_password(
    user: &str,
    password: &[u8],
    lookup: &dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>,
) -> Result<Principal, AuthError> {
    // The strongest stored credential decides.
    let stored = [ScramMechanism::Sha512, ScramMechanism::Sha256]
        .into_iter()
        .find_map(|m| lookup(user, m).map(|c| (m, c)));
    match stored {
        Some((m, c)) if c.verifies(m, password) => Ok(Principal::user(user)),
        Some(_) => Err(AuthError::invalid(format!(
            "user {user:?} (PLAIN): wrong password"
        ))),
        None => {
            let decoy = ScramCredential {
                salt: vec![0; 16],
                stored_key: vec![0; 64],
                server_key: vec![0; 64],
                iterations: MIN_ITERATIONS,
            };
            let _ = decoy.verifies(ScramMechanism::Sha512, password);
            Err(AuthError::invalid(format!(
                "user {user:?} (PLAIN): no such user"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(user: &str, m: ScramMechanism) -> Option<ScramCredential> {
        (user == "alice" && m == ScramMechanism::Sha256)
            .then(|| ScramCredential::from_password(m, "pw", b"salt".to_vec(), 4096))
    }

    #[test]
    fn plain_checks_the_stored_hash() {
        assert_eq!(
            authenticate(b"\0alice\0pw", &lookup).unwrap(),
            Principal::user("alice")
        );
        assert_eq!(
            authenticate(b"alice\0alice\0pw", &lookup).unwrap(),
            Principal::user("alice")
        );
        let wrong = authenticate(b"\0alice\0px", &lookup).unwrap_err();
        let unknown = authenticate(b"\0bob\0pw", &lookup).unwrap_err();
        assert_eq!(wrong.to_string(), unknown.to_string());
        assert!(authenticate(b"bob\0alice\0pw", &lookup).is_err());
        for bad in [
            &b""[..],
            b"alice",
            b"\0alice",
            b"\0\0pw",
            b"\0alice\0",
            b"\0a\0b\0c",
        ] {
            assert!(
                matches!(authenticate(bad, &lookup), Err(AuthError::Malformed(_))),
                "{bad:?}"
            );
        }
    }
}
