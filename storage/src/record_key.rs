//! The key that authenticates the records poddebug reads back from places others can write.
//!
//! poddebug keeps what replicas must agree on in the cluster (session Leases, stop records) and
//! in the object store (recording metadata). Those places are writable by more than poddebug:
//! anyone granted `create leases` in the server's namespace, an operator's tooling, whoever holds
//! the bucket's credentials. A record that opens a gate (a moderator's session, a stop) must
//! therefore be one poddebug wrote. Each such record carries an HMAC-SHA256 over its canonical
//! content, computed with this key; a record whose MAC does not verify is ignored, counted and
//! logged by its reader.
//!
//! The key is 32 random bytes in the Secret [`SECRET_NAME`] of the server's namespace, under
//! [`SECRET_KEY`]. The first replica to start creates it (`create`; a replica that loses the race
//! reads the winner's), so every replica signs and verifies with the same key and no operator
//! step is needed. Only the server's ServiceAccount may read it (manifests/rbac.yaml).
//!
//! A MAC is `v1.KEYID.MAC`: `KEYID` the first 8 hex digits of the key's SHA-256 (which key signed,
//! for people reading a record after a rotation), `MAC` base64url without padding. The MAC covers
//! a purpose string (so a record of one kind can never be replayed as another) and the content,
//! each length-prefixed. Rotation: delete the Secret and restart the replicas (docs/operator-guide.md).

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use ring::hmac;

use crate::StorageError;

/// The Secret holding the key, in the server's namespace.
pub const SECRET_NAME: &str = "poddebug-record-key";
/// The key's entry in the Secret's `data`.
pub const SECRET_KEY: &str = "hmac-sha256";
/// Length of a generated key.
const KEY_LEN: usize = 32;
/// Shortest key accepted from a Secret someone else made.
const MIN_KEY_LEN: usize = 16;
/// Version prefix of a MAC.
const VERSION: &str = "v1";

/// What a record was signed for: the same content signed for one purpose never verifies for
/// another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A live session's Lease.
    Session,
    /// A stop (or expiry) that was requested of a debug container.
    Stop,
    /// A recording's metadata in the object store.
    Recording,
    /// The commands derived from a recording's input, in the object store.
    RecordingCommands,
    /// A debug request (just-in-time access) and its reviews.
    Request,
}

impl Purpose {
    fn as_str(self) -> &'static str {
        match self {
            Purpose::Session => "poddebug.dev/session",
            Purpose::Stop => "poddebug.dev/stop",
            Purpose::Recording => "poddebug.dev/recording",
            Purpose::RecordingCommands => "poddebug.dev/recording-commands",
            Purpose::Request => "poddebug.dev/debug-request",
        }
    }
}

/// The server's record key (module docs). Cheap to clone.
#[derive(Clone)]
pub struct RecordKey {
    key: hmac::Key,
    id: String,
}

impl std::fmt::Debug for RecordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl RecordKey {
    /// A key from its bytes.
    pub fn from_bytes(bytes: &[u8]) -> RecordKey {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(bytes);
        let id = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        RecordKey {
            key: hmac::Key::new(hmac::HMAC_SHA256, bytes),
            id,
        }
    }

    /// A fresh random key (tests, and the Secret's first contents).
    pub fn generate() -> RecordKey {
        RecordKey::from_bytes(&random_key())
    }

    /// The key's id (first 8 hex digits of its SHA-256).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The server's key from the Secret [`SECRET_NAME`] in `namespace`, made when there is none.
    pub async fn load_or_create(
        client: kube::Client,
        namespace: &str,
    ) -> Result<RecordKey, StorageError> {
        let secrets: Api<Secret> = Api::namespaced(client, namespace);
        let (secret, _) = crate::secret_once::get_or_create(
            &secrets,
            SECRET_NAME,
            || {
                Ok(crate::secret_once::managed(
                    SECRET_NAME,
                    namespace,
                    "Opaque",
                    [(SECRET_KEY.to_owned(), random_key().to_vec())].into(),
                ))
            },
            StorageError::from,
        )
        .await?;
        key_of(&secret)
    }

    /// The MAC of `content` for `purpose`.
    pub fn sign(&self, purpose: Purpose, content: &[u8]) -> String {
        let tag = hmac::sign(&self.key, &message(purpose, content));
        format!(
            "{VERSION}.{}.{}",
            self.id,
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    /// Whether `mac` is this key's MAC of `content` for `purpose` (constant time in the MAC).
    pub fn verify(&self, purpose: Purpose, content: &[u8], mac: &str) -> bool {
        let mut parts = mac.splitn(3, '.');
        let (Some(VERSION), Some(_id), Some(tag)) = (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        let Ok(tag) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(tag) else {
            return false;
        };
        hmac::verify(&self.key, &message(purpose, content), &tag).is_ok()
    }
}

/// The server's record key once it is loaded: every replica starts serving before it has read
/// the key (kube-apiserver may be unreachable at first), and is not ready until it has. A record
/// signed while it is absent cannot be made (the caller refuses with 503); a record read while
/// it is absent does not verify. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct SharedRecordKey(std::sync::Arc<std::sync::OnceLock<RecordKey>>);

impl SharedRecordKey {
    /// A holder with `key` loaded (tests, and servers given their key).
    pub fn loaded(key: RecordKey) -> SharedRecordKey {
        let s = SharedRecordKey::default();
        let _ = s.0.set(key);
        s
    }

    /// The key, once loaded.
    pub fn get(&self) -> Option<&RecordKey> {
        self.0.get()
    }

    /// Load (or make) the key from the cluster until that succeeds, backing off to 5 s between
    /// tries; every failure is logged.
    pub async fn load(&self, client: kube::Client, namespace: String) {
        let mut delay = std::time::Duration::from_millis(200);
        while self.get().is_none() {
            match RecordKey::load_or_create(client.clone(), &namespace).await {
                Ok(k) => {
                    tracing::info!(key_id = k.id(), secret = SECRET_NAME, %namespace, "record key loaded");
                    let _ = self.0.set(k);
                }
                Err(e) => {
                    tracing::warn!(error = %e, secret = SECRET_NAME, %namespace, "the record key cannot be loaded yet");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(std::time::Duration::from_secs(5));
                }
            }
        }
    }
}

/// The signed bytes: each part length-prefixed, so no two (purpose, content) pairs collide.
fn message(purpose: Purpose, content: &[u8]) -> Vec<u8> {
    let p = purpose.as_str().as_bytes();
    let mut m = Vec::with_capacity(p.len() + content.len() + 16);
    m.extend_from_slice(&(p.len() as u64).to_be_bytes());
    m.extend_from_slice(p);
    m.extend_from_slice(&(content.len() as u64).to_be_bytes());
    m.extend_from_slice(content);
    m
}

fn random_key() -> [u8; KEY_LEN] {
    use rand::RngCore;
    let mut k = [0u8; KEY_LEN];
    rand::rng().fill_bytes(&mut k);
    k
}

fn key_of(s: &Secret) -> Result<RecordKey, StorageError> {
    let bytes = s
        .data
        .as_ref()
        .and_then(|d| d.get(SECRET_KEY))
        .map(|b| b.0.as_slice())
        .unwrap_or_default();
    if bytes.len() < MIN_KEY_LEN {
        return Err(StorageError::Api(poddebug_types::ApiError::Internal(
            format!(
                "the Secret {SECRET_NAME} has no usable key under {SECRET_KEY:?} (at least \
                 {MIN_KEY_LEN} bytes): delete it and restart the server to have a new one made"
            ),
        )));
    }
    Ok(RecordKey::from_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mac_verifies_for_its_key_purpose_and_content_only() {
        let k = RecordKey::from_bytes(&[7; 32]);
        let mac = k.sign(Purpose::Session, b"record");
        assert!(mac.starts_with(&format!("v1.{}.", k.id())));
        assert!(k.verify(Purpose::Session, b"record", &mac));
        assert!(!k.verify(Purpose::Session, b"recorD", &mac));
        assert!(
            !k.verify(Purpose::Stop, b"record", &mac),
            "a session MAC is no stop MAC"
        );
        let other = RecordKey::from_bytes(&[8; 32]);
        assert!(!other.verify(Purpose::Session, b"record", &mac));
        for forged in [
            "",
            "v1",
            "v1.x",
            "v2.x.AAAA",
            "v1.x.!!!",
            &mac[..mac.len() - 2],
        ] {
            assert!(!k.verify(Purpose::Session, b"record", forged), "{forged:?}");
        }
        // The key id names no secret: it is the same for the same key.
        assert_eq!(k.id(), RecordKey::from_bytes(&[7; 32]).id());
        assert_ne!(k.id(), other.id());
    }

    #[test]
    fn secrets_without_a_usable_key_are_refused() {
        let mut s = Secret::default();
        assert!(key_of(&s).is_err());
        s.data = Some([(SECRET_KEY.to_owned(), k8s_openapi::ByteString(vec![1; 8]))].into());
        assert!(key_of(&s).is_err());
        s.data = Some([(SECRET_KEY.to_owned(), k8s_openapi::ByteString(vec![1; 32]))].into());
        assert_eq!(
            key_of(&s).map(|k| k.id().to_owned()).ok(),
            Some(RecordKey::from_bytes(&[1; 32]).id().to_owned())
        );
    }
}
