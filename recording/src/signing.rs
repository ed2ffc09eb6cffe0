//! Ed25519 keys (through `ring`, the crypto provider the rest of poddebug uses): the server's
//! signing key, the public keys a verifier trusts, and what a signature covers.
//!
//! A key's id is the first 16 hex digits of the SHA-256 of its raw public key, so that anyone
//! holding the public key computes the same id. A signature covers a purpose string and the
//! content, each length-prefixed, so that content signed for one purpose (a part's seal) never
//! verifies for another (the recording's statement). Signatures are base64url without padding.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

use crate::Error;

/// Length of a raw Ed25519 public key.
pub const PUBLIC_KEY_LEN: usize = 32;

/// The id of the key whose raw public key is `public`.
pub fn key_id(public: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, public);
    crate::chain::hex(&digest.as_ref()[..8])
}

/// What is signed: the purpose and the content, each length-prefixed.
fn message(purpose: &str, content: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(purpose.len() + content.len() + 12);
    m.extend_from_slice(&(purpose.len() as u32).to_be_bytes());
    m.extend_from_slice(purpose.as_bytes());
    m.extend_from_slice(&(content.len() as u64).to_be_bytes());
    m.extend_from_slice(content);
    m
}

/// The server's signing key (a private key). Cheap to clone.
#[derive(Clone)]
pub struct SigningKey {
    pair: Arc<Ed25519KeyPair>,
    id: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A fresh key and its PKCS#8 document (what the Secret keeps).
    pub fn generate() -> Result<(SigningKey, Vec<u8>), Error> {
        let rng = ring::rand::SystemRandom::new();
        let doc = Ed25519KeyPair::generate_pkcs8(&rng)
            .map_err(|_| Error::Key("no randomness for a new key".to_owned()))?;
        let key = SigningKey::from_pkcs8(doc.as_ref())?;
        Ok((key, doc.as_ref().to_vec()))
    }

    /// The key in a PKCS#8 document: v2 as `ring` writes it, or v1 as
    /// `openssl genpkey -algorithm ed25519 -outform DER` does.
    pub fn from_pkcs8(der: &[u8]) -> Result<SigningKey, Error> {
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
            .map_err(|e| Error::Key(format!("not an Ed25519 PKCS#8 key: {e}")))?;
        let id = key_id(pair.public_key().as_ref());
        Ok(SigningKey {
            pair: Arc::new(pair),
            id,
        })
    }

    /// The key's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey {
            bytes: self.pair.public_key().as_ref().to_vec(),
            id: self.id.clone(),
        }
    }

    /// The signature of `content` for `purpose`.
    pub fn sign(&self, purpose: &str, content: &[u8]) -> String {
        let sig = self.pair.sign(&message(purpose, content));
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sig.as_ref())
    }
}

/// A public key a verifier trusts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    bytes: Vec<u8>,
    id: String,
}

impl PublicKey {
    /// The key of `bytes` (raw, 32 bytes).
    pub fn from_bytes(bytes: &[u8]) -> Result<PublicKey, Error> {
        if bytes.len() != PUBLIC_KEY_LEN {
            return Err(Error::Key(format!(
                "an Ed25519 public key has {PUBLIC_KEY_LEN} bytes, not {}",
                bytes.len()
            )));
        }
        Ok(PublicKey {
            bytes: bytes.to_vec(),
            id: key_id(bytes),
        })
    }

    /// The key of its standard base64 (as `recordingkeys` publishes it).
    pub fn from_base64(text: &str) -> Result<PublicKey, Error> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| Error::Key(format!("the public key is not base64: {e}")))?;
        PublicKey::from_bytes(&bytes)
    }

    /// The key's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The raw key.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The key in standard base64.
    pub fn to_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.bytes)
    }

    /// Whether `signature` is this key's signature of `content` for `purpose`.
    pub fn verify(&self, purpose: &str, content: &[u8], signature: &str) -> bool {
        let Ok(sig) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(signature) else {
            return false;
        };
        UnparsedPublicKey::new(&ED25519, &self.bytes)
            .verify(&message(purpose, content), &sig)
            .is_ok()
    }
}

/// The public keys a verifier trusts, by id.
#[derive(Clone, Debug, Default)]
pub struct KeySet {
    keys: BTreeMap<String, PublicKey>,
}

impl KeySet {
    /// The set of `keys`.
    pub fn new(keys: impl IntoIterator<Item = PublicKey>) -> KeySet {
        KeySet {
            keys: keys.into_iter().map(|k| (k.id.clone(), k)).collect(),
        }
    }

    /// The key of `id`.
    pub fn get(&self, id: &str) -> Option<&PublicKey> {
        self.keys.get(id)
    }

    /// Every key.
    pub fn iter(&self) -> impl Iterator<Item = &PublicKey> {
        self.keys.values()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether `signature` by the key `key_id` holds over `content` for `purpose`; why not
    /// otherwise.
    pub fn check(
        &self,
        key_id: &str,
        purpose: &str,
        content: &[u8],
        signature: &str,
    ) -> Result<(), String> {
        let Some(key) = self.get(key_id) else {
            return Err(format!(
                "signed by key {key_id:?}, which is not one of the trusted public keys"
            ));
        };
        if key.verify(purpose, content, signature) {
            Ok(())
        } else {
            Err(format!("the signature by key {key_id} does not hold"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_hold_for_their_purpose_and_content_only() {
        let (key, pkcs8) = SigningKey::generate().unwrap();
        let again = SigningKey::from_pkcs8(&pkcs8).unwrap();
        assert_eq!(key.id(), again.id());
        assert_eq!(key.id().len(), 16);
        let sig = key.sign("a", b"content");
        let public = PublicKey::from_base64(&key.public_key().to_base64()).unwrap();
        assert_eq!(public.id(), key.id());
        assert!(public.verify("a", b"content", &sig));
        assert!(!public.verify("b", b"content", &sig), "another purpose");
        assert!(!public.verify("a", b"contenu", &sig), "other content");
        assert!(!public.verify("ac", b"ontent", &sig), "the boundary moved");
        assert!(!public.verify("a", b"content", "not base64!"));
        let (other, _) = SigningKey::generate().unwrap();
        let set = KeySet::new([other.public_key()]);
        assert!(set.check(key.id(), "a", b"content", &sig).is_err());
        let set = KeySet::new([other.public_key(), public]);
        assert!(set.check(key.id(), "a", b"content", &sig).is_ok());
        assert!(PublicKey::from_bytes(&[0; 31]).is_err());
        assert!(SigningKey::from_pkcs8(b"junk").is_err());
    }

    #[test]
    fn an_openssl_pkcs8_v1_key_is_accepted() {
        // `openssl genpkey -algorithm ed25519 -outform DER`: PKCS#8 v1, no public key inside.
        let der: [u8; 48] = [
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
            22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
        ];
        let key = SigningKey::from_pkcs8(&der).unwrap();
        assert!(key.public_key().verify("p", b"c", &key.sign("p", b"c")));
    }
}
