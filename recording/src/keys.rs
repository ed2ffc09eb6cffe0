//! The server's recording keys as a Secret holds them, and the set a replica loaded.
//!
//! The Secret's entries:
//! - `KEYID.pk8`: a private key (PKCS#8 DER), one the server may sign with;
//! - `KEYID.pub`: the raw public key of a retired key, whose private key was destroyed: it
//!   still verifies the recordings it signed, and is still published;
//! - `active`: the id of the key that signs new recordings (needed when there are several
//!   private keys).
//!
//! Rotation (docs/operator-guide.md): add the new key's `.pk8`, point `active` at it; then
//! replace the old `.pk8` by its `.pub`. Replicas read the Secret again every
//! `--recording-keys-resync-period` and take the keys it then holds ([`SharedKeys::set`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::Error;
use crate::signing::{KeySet, PublicKey, SigningKey};

/// The entry naming the active key.
pub const ACTIVE: &str = "active";
/// Suffix of a private key's entry.
pub const PRIVATE_SUFFIX: &str = ".pk8";
/// Suffix of a retired key's public key.
pub const PUBLIC_SUFFIX: &str = ".pub";

/// A replica's keys: the one it signs with, and every key it trusts and publishes.
#[derive(Clone, Debug)]
pub struct Keys {
    active: SigningKey,
    trusted: KeySet,
    /// Ids of the keys the Secret holds privately (the others are retired).
    private: Vec<String>,
}

impl Keys {
    /// The keys of the Secret's entries.
    pub fn from_entries(entries: &BTreeMap<String, Vec<u8>>) -> Result<Keys, Error> {
        let mut private = Vec::new();
        let mut public = Vec::new();
        for (name, value) in entries {
            if let Some(named) = name.strip_suffix(PRIVATE_SUFFIX) {
                let k = SigningKey::from_pkcs8(value)
                    .map_err(|e| Error::Key(format!("entry {name}: {e}")))?;
                if k.id() != named {
                    return Err(Error::Key(format!(
                        "entry {name} holds the key {}: name it {}{PRIVATE_SUFFIX}",
                        k.id(),
                        k.id()
                    )));
                }
                private.push(k);
            } else if let Some(named) = name.strip_suffix(PUBLIC_SUFFIX) {
                let k = PublicKey::from_bytes(value)
                    .map_err(|e| Error::Key(format!("entry {name}: {e}")))?;
                if k.id() != named {
                    return Err(Error::Key(format!(
                        "entry {name} holds the key {}: name it {}{PUBLIC_SUFFIX}",
                        k.id(),
                        k.id()
                    )));
                }
                public.push(k);
            }
        }
        let active_id = entries
            .get(ACTIVE)
            .map(|v| String::from_utf8_lossy(v).trim().to_owned());
        let active = match (&active_id, private.len()) {
            (Some(id), _) => private
                .iter()
                .find(|k| k.id() == id)
                .cloned()
                .ok_or_else(|| {
                    Error::Key(format!(
                        "{ACTIVE} names {id}, but there is no entry {id}{PRIVATE_SUFFIX}"
                    ))
                })?,
            (None, 1) => private[0].clone(),
            (None, 0) => return Err(Error::Key("no private key (KEYID.pk8)".to_owned())),
            (None, _) => {
                return Err(Error::Key(format!(
                    "several private keys and no {ACTIVE} entry naming the one that signs"
                )));
            }
        };
        let ids = private.iter().map(|k| k.id().to_owned()).collect();
        let trusted = KeySet::new(private.iter().map(SigningKey::public_key).chain(public));
        Ok(Keys {
            active,
            trusted,
            private: ids,
        })
    }

    /// The entries of a new Secret: one fresh key, active.
    pub fn new_entries() -> Result<BTreeMap<String, Vec<u8>>, Error> {
        let (key, pkcs8) = SigningKey::generate()?;
        Ok(BTreeMap::from([
            (format!("{}{PRIVATE_SUFFIX}", key.id()), pkcs8),
            (ACTIVE.to_owned(), key.id().as_bytes().to_vec()),
        ]))
    }

    /// Keys of one fresh key (tests, benchmarks).
    pub fn generate() -> Result<Keys, Error> {
        Keys::from_entries(&Keys::new_entries()?)
    }

    /// The key new recordings are signed with.
    pub fn active(&self) -> &SigningKey {
        &self.active
    }

    /// The keys recordings verify with.
    pub fn trusted(&self) -> &KeySet {
        &self.trusted
    }

    /// Whether the Secret holds `id`'s private key (else it is retired).
    pub fn has_private(&self, id: &str) -> bool {
        self.private.iter().any(|p| p == id)
    }
}

/// How the keys are read from where they are kept (the server's Secret): the keys it holds, or
/// why they cannot be had.
pub type KeyReader = Arc<
    dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Keys, String>> + Send>>
        + Send
        + Sync,
>;

/// Least time between two reads made at once because a recording named a key not held
/// ([`SharedKeys::holding`]).
pub const READ_AT_ONCE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// A replica's keys once loaded (replicas start serving before they have read them), replaced
/// when the Secret changes. Cheap to clone; clones share.
#[derive(Clone, Default)]
pub struct SharedKeys(Arc<Held>);

#[derive(Default)]
struct Held {
    keys: RwLock<Option<Arc<Keys>>>,
    reader: OnceLock<KeyReader>,
    /// When a read was last made at once ([`SharedKeys::holding`]).
    read_at_once: Mutex<Option<std::time::Instant>>,
}

impl std::fmt::Debug for SharedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedKeys")
            .field("keys", &self.get())
            .finish_non_exhaustive()
    }
}

impl SharedKeys {
    /// A holder with `keys` loaded.
    pub fn loaded(keys: Keys) -> SharedKeys {
        let s = SharedKeys::default();
        s.set(keys);
        s
    }

    /// A holder that reads its keys with `reader` ([`SharedKeys::read`]).
    pub fn read_with(reader: KeyReader) -> SharedKeys {
        let s = SharedKeys::default();
        let _ = s.0.reader.set(reader);
        s
    }

    /// The keys now, once loaded. What is signed or verified with them is signed or verified
    /// with this one set, whatever replaces it meanwhile.
    pub fn get(&self) -> Option<Arc<Keys>> {
        self.0.keys.read().ok()?.clone()
    }

    /// Load `keys`, or replace those loaded. Whether that changed anything: another key
    /// active, or another set of keys trusted.
    pub fn set(&self, keys: Keys) -> bool {
        let Ok(mut held) = self.0.keys.write() else {
            return false;
        };
        let same = held.as_ref().is_some_and(|h| h.same_keys(&keys));
        if !same {
            *held = Some(Arc::new(keys));
        }
        !same
    }

    /// Read the keys with the reader and take them: whether they changed. Without a reader,
    /// nothing changes.
    pub async fn read(&self) -> Result<bool, String> {
        let Some(reader) = self.0.reader.get() else {
            return Ok(false);
        };
        Ok(self.set(reader().await?))
    }

    /// The keys, holding `key_id` if it can be had: when the keys held do not trust it (a key
    /// another replica took from the Secret before this one read it again), they are read
    /// again at once, at most every [`READ_AT_ONCE_EVERY`], rather than a recording it signed
    /// being called tampered until the next periodic read.
    pub async fn holding(&self, key_id: &str) -> Option<Arc<Keys>> {
        let keys = self.get()?;
        if keys.trusted().get(key_id).is_some() {
            return Some(keys);
        }
        let due = self.0.read_at_once.lock().is_ok_and(|mut last| {
            let now = std::time::Instant::now();
            let due = last.is_none_or(|at| now.duration_since(at) >= READ_AT_ONCE_EVERY);
            if due {
                *last = Some(now);
            }
            due
        });
        if due && self.read().await.is_ok_and(|changed| changed) {
            return self.get();
        }
        Some(keys)
    }
}

impl Keys {
    /// Whether `other` signs with the same key and trusts the same ones.
    pub fn same_keys(&self, other: &Keys) -> bool {
        let ids = |k: &Keys| {
            k.trusted
                .iter()
                .map(|p| p.id().to_owned())
                .collect::<Vec<_>>()
        };
        self.active.id() == other.active.id()
            && ids(self) == ids(other)
            && self.private == other.private
    }

    /// The ids of the keys trusted, in order, joined by commas (what a verdict was reached
    /// with).
    pub fn trusted_ids(&self) -> String {
        self.trusted
            .iter()
            .map(|p| p.id())
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_names_its_active_key_and_keeps_retired_ones_public() {
        let fresh = Keys::new_entries().unwrap();
        let keys = Keys::from_entries(&fresh).unwrap();
        assert_eq!(keys.trusted().iter().count(), 1);
        let old = keys.active().clone();
        // Rotation: a new key, active; the old one's private key replaced by its public key.
        let (new, pkcs8) = SigningKey::generate().unwrap();
        let mut rotated = BTreeMap::from([
            (format!("{}.pk8", new.id()), pkcs8),
            (
                format!("{}.pub", old.id()),
                old.public_key().bytes().to_vec(),
            ),
        ]);
        let keys = Keys::from_entries(&rotated).unwrap();
        assert_eq!(keys.active().id(), new.id());
        assert!(keys.trusted().get(old.id()).is_some());
        assert!(!keys.has_private(old.id()));
        // Two private keys need `active`.
        rotated.extend(fresh.clone());
        rotated.remove(ACTIVE);
        assert!(Keys::from_entries(&rotated).is_err());
        rotated.insert(ACTIVE.into(), new.id().as_bytes().to_vec());
        assert_eq!(
            Keys::from_entries(&rotated).unwrap().active().id(),
            new.id()
        );
        // Misnamed or broken entries are refused.
        let mut wrong = fresh.clone();
        let v = wrong.remove(&format!("{}.pk8", old.id())).unwrap();
        wrong.insert("0000000000000000.pk8".into(), v);
        assert!(Keys::from_entries(&wrong).is_err());
        assert!(Keys::from_entries(&BTreeMap::new()).is_err());
        let mut active_missing = fresh;
        active_missing.insert(ACTIVE.into(), b"ffff".to_vec());
        assert!(Keys::from_entries(&active_missing).is_err());
    }

    #[test]
    fn loaded_keys_are_replaced_when_the_secret_holds_others() {
        let shared = SharedKeys::default();
        assert!(shared.get().is_none());
        let first = Keys::new_entries().unwrap();
        assert!(shared.set(Keys::from_entries(&first).unwrap()), "loaded");
        let before = shared.get().unwrap();
        assert!(
            !shared.set(Keys::from_entries(&first).unwrap()),
            "the same keys"
        );
        // A new active key, the old one kept: replaced, and what was taken before stays as it was.
        let (new, pkcs8) = SigningKey::generate().unwrap();
        let mut rotated = first.clone();
        rotated.insert(format!("{}.pk8", new.id()), pkcs8);
        rotated.insert(ACTIVE.into(), new.id().as_bytes().to_vec());
        assert!(shared.set(Keys::from_entries(&rotated).unwrap()));
        let now = shared.get().unwrap();
        assert_eq!(now.active().id(), new.id());
        assert_eq!(now.trusted().iter().count(), 2);
        assert_ne!(before.active().id(), new.id());
        assert_ne!(before.trusted_ids(), now.trusted_ids());
        // The same active key with a key fewer trusted is a change too.
        rotated.retain(|k, _| !k.starts_with(before.active().id()));
        assert!(shared.set(Keys::from_entries(&rotated).unwrap()));
        assert_eq!(shared.get().unwrap().trusted_ids(), new.id());
    }

    #[tokio::test]
    async fn a_key_not_held_is_read_at_once_at_most_every_few_seconds() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let first = Keys::new_entries().unwrap();
        let (new, pkcs8) = SigningKey::generate().unwrap();
        let mut rotated = first.clone();
        rotated.insert(format!("{}.pk8", new.id()), pkcs8);
        rotated.insert(ACTIVE.into(), new.id().as_bytes().to_vec());
        let reads = Arc::new(AtomicUsize::new(0));
        let reader: KeyReader = {
            let (reads, rotated) = (reads.clone(), rotated.clone());
            Arc::new(move || {
                reads.fetch_add(1, Ordering::SeqCst);
                let keys = Keys::from_entries(&rotated).map_err(|e| e.to_string());
                Box::pin(async move { keys })
            })
        };
        let shared = SharedKeys::read_with(reader);
        assert!(
            shared.holding(new.id()).await.is_none(),
            "nothing loaded yet"
        );
        shared.set(Keys::from_entries(&first).unwrap());
        let old = shared.get().unwrap().active().id().to_owned();
        // A key held: no read.
        assert_eq!(shared.holding(&old).await.unwrap().active().id(), old);
        assert_eq!(reads.load(Ordering::SeqCst), 0);
        // A key not held: read at once, and taken.
        let keys = shared.holding(new.id()).await.unwrap();
        assert!(keys.trusted().get(new.id()).is_some());
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        // Another key not held, right after: no second read within READ_AT_ONCE_EVERY.
        let keys = shared.holding("0000000000000000").await.unwrap();
        assert_eq!(keys.active().id(), new.id());
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }
}
