//! Attach tickets: how a page of the server's own origin proves it in a WebSocket handshake.
//!
//! A browser's WebSocket handshake carries `Origin` and nothing else that tells where the page
//! came from: Chromium sends no Fetch Metadata on it (seen on 156), kube-apiserver forwards no
//! `X-Forwarded-Host` on upgrades, and `kubectl proxy` rewrites `Host` to kube-apiserver's. So
//! behind `kubectl proxy` the server cannot tell the portal's own WebSocket (`Origin:
//! http://127.0.0.1:8001`) from one opened by a page on another port of the same host.
//!
//! The portal therefore proves it: every read of a debug container that a browser makes from a
//! page of the server's origin (`Sec-Fetch-Site: same-origin`, which no page can forge) is
//! answered with a ticket in the `Poddebug-Attach-Ticket` header, which a page on another
//! origin can neither cause nor read (the read is refused; without CORS its headers are
//! hidden anyway). The page offers it as the WebSocket subprotocol
//! `ticket.poddebug.dev.<ticket>` beside `v5.channel.k8s.io`; the server strips it before the
//! stream goes upstream.
//!
//! A ticket is `v1.<expiry, unix seconds>.<HMAC-SHA256>`, valid for [`LIFETIME`], for the user
//! it was issued to only. The key is derived from the serving certificate's private key
//! (`--tls-private-key-file`, or the self-signed one in `--cert-dir`): every replica that serves
//! with the same certificate (as the aggregator requires) accepts every other's tickets, and no
//! state is kept. After a rotation the previous key is still accepted by a replica that saw it.

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use sha2::Digest;

/// The response header a ticket is handed out in.
pub const HEADER: &str = "poddebug-attach-ticket";
/// The WebSocket subprotocol prefix a ticket is offered under.
pub const SUBPROTOCOL_PREFIX: &str = "ticket.poddebug.dev.";
/// How long a ticket is valid.
pub const LIFETIME: Duration = Duration::from_secs(60);

/// The keys (current first) and where they come from.
#[derive(Debug)]
pub struct Tickets {
    keys: RwLock<Vec<hmac::Key>>,
    /// The private key file and its last modification time, when the key follows one.
    source: Option<(PathBuf, RwLock<Option<SystemTime>>)>,
}

fn key_from(secret: &[u8]) -> hmac::Key {
    let mut h = sha2::Sha256::new();
    h.update(b"poddebug.dev attach tickets v1\n");
    h.update(secret);
    hmac::Key::new(hmac::HMAC_SHA256, &h.finalize())
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

fn message(user: &str, expiry: u64) -> String {
    format!("attach-ticket\n{expiry}\n{user}")
}

impl Tickets {
    /// Keys derived from the private key in `path` (re-read by [`Tickets::reload_if_changed`]).
    pub fn from_key_file(path: &Path) -> std::io::Result<Tickets> {
        let secret = std::fs::read(path)?;
        Ok(Tickets {
            keys: RwLock::new(vec![key_from(&secret)]),
            source: Some((path.to_owned(), RwLock::new(mtime(path)))),
        })
    }

    /// Keys from `secret` (tests).
    pub fn from_secret(secret: &[u8]) -> Tickets {
        Tickets {
            keys: RwLock::new(vec![key_from(secret)]),
            source: None,
        }
    }

    /// Follow a rotation of the private key file: the new key signs, the previous one is still
    /// accepted.
    pub fn reload_if_changed(&self) {
        let Some((path, stamp)) = &self.source else {
            return;
        };
        let now = mtime(path);
        if stamp.read().is_ok_and(|s| *s == now) {
            return;
        }
        let Ok(secret) = std::fs::read(path) else {
            return;
        };
        if let (Ok(mut keys), Ok(mut s)) = (self.keys.write(), stamp.write()) {
            keys.insert(0, key_from(&secret));
            keys.truncate(2);
            *s = now;
        }
    }

    /// A ticket for `user`, valid from `now` for [`LIFETIME`].
    pub fn issue(&self, user: &str, now: SystemTime) -> Option<String> {
        let expiry = now
            .checked_add(LIFETIME)?
            .duration_since(SystemTime::UNIX_EPOCH)
            .ok()?
            .as_secs();
        let keys = self.keys.read().ok()?;
        let tag = hmac::sign(keys.first()?, message(user, expiry).as_bytes());
        Some(format!(
            "v1.{expiry}.{}",
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        ))
    }

    /// Whether `ticket` is a valid, unexpired ticket of `user` at `now`.
    pub fn verify(&self, ticket: &str, user: &str, now: SystemTime) -> bool {
        let mut parts = ticket.splitn(3, '.');
        let (Some("v1"), Some(expiry), Some(tag)) = (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        let Ok(expiry) = expiry.parse::<u64>() else {
            return false;
        };
        let Ok(now) = now.duration_since(SystemTime::UNIX_EPOCH) else {
            return false;
        };
        // Not expired, and not issued further ahead than a ticket lives (a forged expiry).
        if expiry < now.as_secs() || expiry > now.as_secs() + LIFETIME.as_secs() + 5 {
            return false;
        }
        let Ok(tag) = URL_SAFE_NO_PAD.decode(tag) else {
            return false;
        };
        let Ok(keys) = self.keys.read() else {
            return false;
        };
        let msg = message(user, expiry);
        keys.iter()
            .any(|k| hmac::verify(k, msg.as_bytes(), &tag).is_ok())
    }

    /// The ticket a WebSocket handshake offers in `Sec-WebSocket-Protocol`, if any.
    pub fn offered(headers: &http::HeaderMap) -> Option<String> {
        headers
            .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .find_map(|p| p.trim().strip_prefix(SUBPROTOCOL_PREFIX))
            .map(str::to_owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_for_its_user_and_its_minute() {
        let t = Tickets::from_secret(b"key");
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let ticket = t.issue("alice", now).unwrap();
        assert!(ticket.starts_with("v1.1800000060."), "{ticket}");
        assert!(t.verify(&ticket, "alice", now));
        assert!(t.verify(&ticket, "alice", now + Duration::from_secs(60)));
        assert!(
            !t.verify(&ticket, "alice", now + Duration::from_secs(61)),
            "expired"
        );
        assert!(!t.verify(&ticket, "bob", now), "another user");
        assert!(
            !Tickets::from_secret(b"other").verify(&ticket, "alice", now),
            "another key"
        );
        // A longer life written into the ticket breaks its tag; one far ahead is refused as is.
        let forged = ticket.replace("1800000060", "1800000999");
        assert!(!t.verify(&forged, "alice", now));
        for garbage in ["", "v1", "v1.x.y", "v2.1800000060.abc", "v1.1800000060.!!"] {
            assert!(!t.verify(garbage, "alice", now), "{garbage}");
        }
    }

    #[test]
    fn after_a_rotation_the_previous_key_still_verifies() {
        let dir = std::env::temp_dir().join(format!("pd-ticket-{:x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("tls.key");
        std::fs::write(&key, b"first").unwrap();
        let t = Tickets::from_key_file(&key).unwrap();
        let now = SystemTime::now();
        let old = t.issue("alice", now).unwrap();
        std::fs::write(&key, b"second").unwrap();
        // Make sure the modification time differs from the one seen.
        let later = SystemTime::now() + Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&key)
            .unwrap()
            .set_modified(later)
            .unwrap();
        t.reload_if_changed();
        let new = t.issue("alice", now).unwrap();
        assert_ne!(old, new);
        assert!(t.verify(&old, "alice", now) && t.verify(&new, "alice", now));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_offered_ticket_is_found_among_the_subprotocols() {
        let mut h = http::HeaderMap::new();
        h.insert(
            http::header::SEC_WEBSOCKET_PROTOCOL,
            "v5.channel.k8s.io, ticket.poddebug.dev.v1.1.abc"
                .parse()
                .unwrap(),
        );
        assert_eq!(Tickets::offered(&h).as_deref(), Some("v1.1.abc"));
        assert_eq!(Tickets::offered(&http::HeaderMap::new()), None);
    }
}
