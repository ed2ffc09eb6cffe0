//! Where recordings live: a directory (`file:///var/lib/poddebug/recordings`) or a bucket of
//! an S3-compatible object store (`s3://BUCKET/PREFIX`), through the `object_store` crate. Every
//! replica reads and writes the same place, so any replica lists and serves any recording.
//!
//! Under the store's prefix, one recording is
//! - `NAMESPACE/POD/ID.json`: its metadata (what lists are served from, so listing never reads
//!   a recording), written when the session starts, rewritten with each part and at the end;
//! - `NAMESPACE/POD/ID/NNNNNNNN.part`: the asciicast file, in parts written while the session
//!   runs, each a whole object: the recording is the parts in name order. A part is written once
//!   [`PART_BYTES`] have gathered or the part interval has passed, so a replica killed
//!   mid-session loses at most that much (and the metadata, no longer renewed, then reads
//!   `truncated`);
//! - `NAMESPACE/POD/ID/commands.json`: the commands derived from the recorded input (with
//!   `--record-input`), rewritten with the part that holds the input they came from; bounded
//!   ([`crate::commands::MAX_COMMANDS`], [`crate::commands::MAX_COMMAND_BYTES`]);
//! - `NAMESPACE/POD/ID/index`: the search index of its commands and output ([`index`]),
//!   rewritten with the parts that hold new lines of them, and at the end; bounded
//!   ([`crate::index::MAX_TEXT`]).
//!
//! The metadata carries the record key's MAC ([`Purpose::Recording`]) over its location and its
//! content, written anew with each rewrite; so do the commands
//! ([`Purpose::RecordingCommands`]). A list says whether each verified: metadata that
//! does not (someone with access to the store wrote or changed it, or an earlier version wrote
//! it) is listed with `status.verified: false`, counted in
//! `poddebug_untrusted_records_total{kind="recording"}` and logged once per object version, and
//! counts toward nobody's quota.
//!
//! Parts are separate objects rather than one S3 multipart upload because an upload that is
//! never completed (its replica killed) is invisible: the whole session would be lost.
//! Recordings of earlier versions (`NAMESPACE/POD/ID.cast`, one file) are still listed and read.
//!
//! Ids are made here and checked strictly before they name an object; namespace and pod names
//! were checked as DNS names by the handler chain before any handler ran.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use poddebug_storage::record_key::{Purpose, SharedRecordKey};
use poddebug_storage::{RecordKind, UntrustedRecords};
use poddebug_types::evidence::VerificationStatus;
use poddebug_types::{RecordingCommand, RecordingCommandList};

use crate::keys::{Keys, SharedKeys};
use crate::range::TimeRange;

pub mod index;
pub use index::{IndexRead, MAX_INDEX_OBJECT};
use serde::{Deserialize, Serialize};

/// The metadata of one recording (the `ID.json` object and one item of the list).
pub type Metadata = poddebug_types::RecordingRecord;

/// A part is written once this much of the recording has gathered, or once the part interval
/// (`--recording-part-interval`) has passed since the previous one, whichever comes first.
pub const PART_BYTES: usize = 1 << 20;
/// A recording whose metadata was not renewed for this many part intervals, and that has no
/// end, lost its recorder (the replica died): it reads `truncated`.
pub use crate::verify::ABANDONED_AFTER_INTERVALS;
/// Most bytes read of a part for its header line (a header is a few hundred bytes).
const HEADER_BYTES: usize = 64 << 10;
/// Metadata objects read at once when listing.
const LIST_READS: usize = 16;
/// Most objects one scan of the store's sizes reads ([`Store::sizes`]); past it the scan stops
/// and says so.
pub const MAX_SCANNED: usize = 1_000_000;
/// Version of what a metadata MAC covers.
const META_CONTENT: &str = "recording/v1";
/// Version of what a commands MAC covers.
const COMMANDS_CONTENT: &str = "recording-commands/v1";
/// Name of the commands object in a recording's folder.
const COMMANDS_FILE: &str = "commands.json";
/// Largest commands object read back (what the writer writes is bounded well below it).
const MAX_COMMANDS_OBJECT: u64 = 8 << 20;

/// The commands object (`ID/commands.json`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredCommands {
    items: Vec<RecordingCommand>,
    #[serde(default)]
    dropped: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mac: Option<String>,
}

/// What a commands MAC covers: the recording's location and the commands.
fn commands_content(
    (namespace, pod, id): (&str, &str, &str),
    items: &[RecordingCommand],
    dropped: u64,
) -> Vec<u8> {
    serde_json::to_vec(&(COMMANDS_CONTENT, namespace, pod, id, items, dropped)).unwrap_or_default()
}

/// A failure of the store that is not the object store's own (a key not loaded, a body that
/// cannot be encoded).
fn generic(e: Box<dyn std::error::Error + Send + Sync>) -> StoreError {
    object_store::Error::Generic {
        store: "recordings",
        source: e,
    }
}

/// A fresh id: the start time (UTC, to the second) and 64 random bits,
/// `20260102t030405z-0123456789abcdef`: lower case, so that it is a valid object name (DNS-1123
/// subdomain) as `metadata.name` of a `Recording`. Earlier versions wrote `T` and `Z`.
pub fn new_id(start: jiff::Timestamp) -> String {
    let stamp = start.strftime("%Y%m%dt%H%M%Sz");
    format!("{stamp}-{:016x}", rand::random::<u64>())
}

/// Whether `id` has exactly the shape [`new_id`] makes, or earlier versions made (`T`, `Z`), so
/// it can name no other object.
pub fn valid_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 33
        && b[..8].iter().all(u8::is_ascii_digit)
        && matches!(b[8], b't' | b'T')
        && b[9..15].iter().all(u8::is_ascii_digit)
        && matches!(b[15], b'z' | b'Z')
        && b[16] == b'-'
        && b[17..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

/// Server-side encryption of the objects written to an S3 bucket (`--recording-sse`): the
/// `x-amz-server-side-encryption` header (and the KMS key's) of every PUT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sse {
    /// `AES256`: keys managed by S3 (SSE-S3).
    Aes256,
    /// `aws:kms[:KEYID]`: a KMS key, the account's default one without `KEYID` (SSE-KMS).
    Kms(Option<String>),
    /// `aws:kms:dsse[:KEYID]`: dual-layer encryption with a KMS key (DSSE-KMS).
    DsseKms(Option<String>),
}

impl std::str::FromStr for Sse {
    type Err = String;

    fn from_str(s: &str) -> Result<Sse, String> {
        let key = |k: &str| {
            if k.is_empty() {
                Err("an empty KMS key id".to_owned())
            } else {
                Ok(Some(k.to_owned()))
            }
        };
        match s {
            "AES256" => Ok(Sse::Aes256),
            "aws:kms" => Ok(Sse::Kms(None)),
            "aws:kms:dsse" => Ok(Sse::DsseKms(None)),
            _ => match s.strip_prefix("aws:kms:") {
                Some(rest) => match rest.strip_prefix("dsse:") {
                    Some(k) => Ok(Sse::DsseKms(key(k)?)),
                    None => Ok(Sse::Kms(key(rest)?)),
                },
                None => Err(format!(
                    "{s:?} is no server-side encryption: give AES256, aws:kms[:KEYID] or \
                     aws:kms:dsse[:KEYID]"
                )),
            },
        }
    }
}

impl Sse {
    /// The value of `x-amz-server-side-encryption`.
    pub fn header(&self) -> &'static str {
        match self {
            Sse::Aes256 => "AES256",
            Sse::Kms(_) => "aws:kms",
            Sse::DsseKms(_) => "aws:kms:dsse",
        }
    }

    /// The KMS key, if one is named.
    pub fn kms_key(&self) -> Option<&str> {
        match self {
            Sse::Aes256 => None,
            Sse::Kms(k) | Sse::DsseKms(k) => k.as_deref(),
        }
    }

    fn configure(
        &self,
        b: object_store::aws::AmazonS3Builder,
    ) -> Result<object_store::aws::AmazonS3Builder, String> {
        use object_store::aws::AmazonS3ConfigKey;
        let key = |name: &str| name.parse::<AmazonS3ConfigKey>().map_err(|e| e.to_string());
        let mut b = b.with_config(key("aws_server_side_encryption")?, self.header());
        if let Some(k) = self.kms_key() {
            b = b.with_config(key("aws_sse_kms_key_id")?, k);
        }
        Ok(b)
    }
}

/// The store of recordings.
#[derive(Clone)]
pub struct Store {
    os: Arc<dyn ObjectStore>,
    prefix: Key,
    url: String,
    key: SharedRecordKey,
    untrusted: UntrustedRecords,
    /// The Ed25519 keys the metadata's statement is signed with and verified against (none:
    /// recordings are written unsigned).
    signing: Option<SharedKeys>,
    /// Whether new recordings are signed with `signing` (false: written unsigned, while the
    /// keys still verify what was signed before; `--recording-signing=false`).
    sign_new: bool,
    /// Verdicts already reached, reused while the objects are unchanged.
    verified: super::verified::Verified,
}

/// A recording's place in the store: namespace, pod, id.
pub type RecordingKey = (String, String, String);

/// The sizes of the recordings a scan found ([`Store::sizes`]).
#[derive(Debug, Default)]
pub struct Sizes {
    /// Bytes in the store per recording (metadata, parts, a single file of earlier versions).
    pub bytes: std::collections::HashMap<RecordingKey, u64>,
    /// False when the scan stopped at [`MAX_SCANNED`] objects.
    pub complete: bool,
}

/// What a metadata MAC covers: the recording's location, and the record as JSON without its
/// MAC.
fn meta_content(namespace: &str, pod: &str, id: &str, m: &Metadata) -> Vec<u8> {
    let mut bare = m.clone();
    bare.mac = None;
    let record = serde_json::to_string(&bare).unwrap_or_default();
    serde_json::to_vec(&(META_CONTENT, namespace, pod, id, record)).unwrap_or_default()
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("url", &self.url).finish()
    }
}

/// A failure of the store, as the handlers and the writer report it.
pub type StoreError = object_store::Error;

impl Store {
    /// The store `url` names: `file:///ABSOLUTE/DIR` (created if missing) or
    /// `s3://BUCKET[/PREFIX]`, with the S3 client configured from the environment as the AWS
    /// tools are (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
    /// `AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, web identity with
    /// `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN`, or the instance's metadata service).
    pub fn from_url(url: &str) -> Result<Store, String> {
        Store::from_url_with(url, None)
    }

    /// The store `url` names ([`Store::from_url`]), an S3 bucket's objects written with the
    /// server-side encryption `sse` asks for (none: the bucket's default).
    pub fn from_url_with(url: &str, sse: Option<&Sse>) -> Result<Store, String> {
        let bad = |why: String| format!("--recording-store={url}: {why}");
        if let Some(path) = url.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(bad(
                    "a file:// store needs an absolute path (file:///DIR)".into()
                ));
            }
            std::fs::create_dir_all(path).map_err(|e| bad(format!("cannot create {path}: {e}")))?;
            let fs = object_store::local::LocalFileSystem::new_with_prefix(path)
                .map_err(|e| bad(e.to_string()))?
                .with_automatic_cleanup(true);
            return Ok(Store {
                os: Arc::new(fs),
                prefix: Key::default(),
                url: url.to_owned(),
                key: SharedRecordKey::default(),
                untrusted: UntrustedRecords::default(),
                signing: None,
                sign_new: true,
                verified: Default::default(),
            });
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad("no bucket (s3://BUCKET/PREFIX)".into()));
            }
            let builder = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
            return Store::s3(builder, prefix, url, sse).map_err(bad);
        }
        Err(bad(
            "unsupported store: give file:///DIR or s3://BUCKET/PREFIX".into(),
        ))
    }

    /// The store of the bucket `builder` names, under `prefix`, with `sse`.
    fn s3(
        builder: object_store::aws::AmazonS3Builder,
        prefix: &str,
        url: &str,
        sse: Option<&Sse>,
    ) -> Result<Store, String> {
        let builder = match sse {
            Some(sse) => sse.configure(builder)?,
            None => builder,
        };
        let s3 = builder.build().map_err(|e| e.to_string())?;
        let prefix = Key::parse(prefix.trim_matches('/')).map_err(|e| e.to_string())?;
        Ok(Store {
            os: Arc::new(s3),
            prefix,
            url: url.to_owned(),
            key: SharedRecordKey::default(),
            untrusted: UntrustedRecords::default(),
            signing: None,
            sign_new: true,
            verified: Default::default(),
        })
    }

    /// The store of a directory (what `--recording-dir` names).
    pub fn dir(dir: &std::path::Path) -> Result<Store, String> {
        let abs = std::path::absolute(dir)
            .map_err(|e| format!("--recording-dir={}: {e}", dir.display()))?;
        Store::from_url(&format!("file://{}", abs.display()))
    }

    /// The store's URL, as configured.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The same store, signing the metadata it writes with `key` and counting the metadata it
    /// reads that does not verify in `untrusted`.
    pub fn authenticated(mut self, key: SharedRecordKey, untrusted: UntrustedRecords) -> Store {
        self.key = key;
        self.untrusted = untrusted;
        self
    }

    /// The same store, signing the statement of the metadata it writes with the active key of
    /// `keys` (which must be loaded by then) and verifying recordings against the keys they
    /// trust.
    pub fn signed_with(mut self, keys: SharedKeys) -> Store {
        self.signing = Some(keys);
        self
    }

    /// The verdicts of recordings already verified ([`super::verified`]), and their counter.
    pub fn verified(&self) -> &super::verified::Verified {
        &self.verified
    }

    /// The same store, writing new recordings unsigned (no statement, no part hashed, no
    /// keyframe) while still verifying what its keys signed before.
    pub fn unsigned_from_now(mut self) -> Store {
        self.sign_new = false;
        self
    }

    /// Whether the metadata written is signed (and so whether parts are worth hashing).
    pub fn signs(&self) -> bool {
        self.sign_new && self.signing.is_some()
    }

    /// The keys recordings are signed with, once loaded (none when recordings are not signed).
    pub fn signing_keys(&self) -> Option<Arc<Keys>> {
        self.signing.as_ref()?.get()
    }

    /// `m` with its MAC verified against where it was read (`namespace/pod/id`): `verified`
    /// set, and if it does not verify, counted and logged once for this `version`.
    fn verify(&self, m: &mut Metadata, (namespace, pod, id): (&str, &str, &str), version: &str) {
        let content = meta_content(namespace, pod, id, m);
        m.verified = m.namespace == namespace
            && m.pod == pod
            && m.id == id
            && m.mac.as_deref().is_some_and(|mac| {
                self.key
                    .get()
                    .is_some_and(|k| k.verify(Purpose::Recording, &content, mac))
            });
        if !m.verified {
            let why = if m.mac.is_none() {
                "no MAC"
            } else {
                "the MAC does not verify"
            };
            self.untrusted.note(
                RecordKind::Recording,
                &format!("{namespace}/{pod}/{id}"),
                version,
                why,
            );
        }
    }

    fn key(&self, parts: &[&str]) -> Key {
        let mut k = self.prefix.clone();
        for p in parts {
            k = k.join(*p);
        }
        k
    }

    fn meta_key(&self, namespace: &str, pod: &str, id: &str) -> Key {
        self.key(&[namespace, pod, &format!("{id}.json")])
    }

    fn part_key(&self, namespace: &str, pod: &str, id: &str, seq: u32) -> Key {
        self.key(&[namespace, pod, id, &format!("{seq:08}.part")])
    }

    /// The record key the objects of recordings are signed with; a failure while it is not
    /// loaded.
    fn record_key(&self) -> Result<&poddebug_storage::record_key::RecordKey, StoreError> {
        self.key
            .get()
            .ok_or_else(|| generic("the record key is not loaded yet".into()))
    }

    /// Write the metadata, signed (one PUT: readers see the old object or the new, never half).
    /// Fails while the record key is not loaded.
    pub async fn write_meta(&self, m: &Metadata) -> Result<(), StoreError> {
        let key = self.record_key()?;
        let mut m = m.clone();
        match self.signing.as_ref().filter(|_| self.sign_new) {
            Some(keys) => {
                let keys = keys
                    .get()
                    .ok_or_else(|| generic("the recording signing key is not loaded yet".into()))?;
                let (parts, complete) = m
                    .evidence
                    .take()
                    .map(|e| (e.parts, e.complete))
                    .unwrap_or_default();
                crate::statement::sign(keys.active(), &mut m, parts, complete);
            }
            None => m.evidence = None,
        }
        m.mac = Some(key.sign(
            Purpose::Recording,
            &meta_content(&m.namespace, &m.pod, &m.id, &m),
        ));
        let body = serde_json::to_vec(&m).map_err(|e| generic(Box::new(e)))?;
        self.os
            .put(
                &self.meta_key(&m.namespace, &m.pod, &m.id),
                PutPayload::from(body),
            )
            .await
            .map(|_| ())
    }

    fn commands_key(&self, namespace: &str, pod: &str, id: &str) -> Key {
        self.key(&[namespace, pod, id, COMMANDS_FILE])
    }

    /// Write the commands of a recording, signed (one PUT). Fails while the record key is not
    /// loaded.
    pub async fn write_commands(
        &self,
        m: &Metadata,
        items: &[RecordingCommand],
        dropped: u64,
    ) -> Result<(), StoreError> {
        let key = self.record_key()?;
        let place = (m.namespace.as_str(), m.pod.as_str(), m.id.as_str());
        let mac = key.sign(
            Purpose::RecordingCommands,
            &commands_content(place, items, dropped),
        );
        let body = serde_json::to_vec(&StoredCommands {
            items: items.to_vec(),
            dropped,
            mac: Some(mac),
        })
        .map_err(|e| generic(Box::new(e)))?;
        self.os
            .put(
                &self.commands_key(&m.namespace, &m.pod, &m.id),
                PutPayload::from(body),
            )
            .await
            .map(|_| ())
    }

    /// The commands of one recording, their MAC verified against where they were read (those
    /// that do not verify are counted and logged once per object version). No object: none
    /// yet (an empty list). Unreadable: `None`.
    pub async fn read_commands(
        &self,
        namespace: &str,
        pod: &str,
        id: &str,
    ) -> Result<Option<RecordingCommandList>, StoreError> {
        let k = self.commands_key(namespace, pod, id);
        let r = match self.os.get(&k).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => {
                return Ok(Some(RecordingCommandList::new(Vec::new(), 0, true)));
            }
            Err(e) => return Err(e),
        };
        if r.meta.size > MAX_COMMANDS_OBJECT {
            tracing::warn!(key = %k, size = r.meta.size, "recording commands too large to read");
            return Ok(None);
        }
        let version = r
            .meta
            .e_tag
            .clone()
            .unwrap_or_else(|| r.meta.last_modified.timestamp_micros().to_string());
        let body = r.bytes().await?;
        let Ok(stored) = serde_json::from_slice::<StoredCommands>(&body) else {
            tracing::warn!(key = %k, "unreadable recording commands");
            return Ok(None);
        };
        let content = commands_content((namespace, pod, id), &stored.items, stored.dropped);
        let verified = stored.mac.as_deref().is_some_and(|mac| {
            self.key
                .get()
                .is_some_and(|key| key.verify(Purpose::RecordingCommands, &content, mac))
        });
        if !verified {
            self.untrusted.note(
                RecordKind::Recording,
                &format!("{namespace}/{pod}/{id}/{COMMANDS_FILE}"),
                &version,
                if stored.mac.is_none() {
                    "no MAC"
                } else {
                    "the MAC does not verify"
                },
            );
        }
        Ok(Some(RecordingCommandList::new(
            stored.items,
            stored.dropped,
            verified,
        )))
    }

    /// Write the keyframe of part `seq` of a recording (`NNNNNNNN.key` beside the part;
    /// [`super::keyframe`]).
    pub async fn write_keyframe(
        &self,
        m: &Metadata,
        seq: u32,
        data: Bytes,
    ) -> Result<(), StoreError> {
        self.os
            .put(
                &self.key(&[&m.namespace, &m.pod, &m.id, &format!("{seq:08}.key")]),
                PutPayload::from(data),
            )
            .await
            .map(|_| ())
    }

    /// Write part `seq` of a recording.
    pub async fn write_part(&self, m: &Metadata, seq: u32, data: Bytes) -> Result<(), StoreError> {
        self.os
            .put(
                &self.part_key(&m.namespace, &m.pod, &m.id, seq),
                PutPayload::from(data),
            )
            .await
            .map(|_| ())
    }

    /// The metadata of the recordings of one pod, of one namespace (`pod` None) or of all
    /// namespaces (both None), oldest first. Unreadable metadata objects are skipped.
    pub async fn list(
        &self,
        namespace: Option<&str>,
        pod: Option<&str>,
    ) -> Result<Vec<Metadata>, StoreError> {
        let mut scope: Vec<&str> = Vec::new();
        if let Some(ns) = namespace {
            scope.push(ns);
            if let Some(p) = pod {
                scope.push(p);
            }
        }
        let prefix = self.key(&scope);
        // Only NS/POD/ID.json objects; parts live one level deeper.
        let depth = self.prefix.parts().count() + 3;
        let keys: Vec<Key> = self
            .os
            .list(Some(&prefix))
            .try_filter_map(|o| {
                let k = o.location;
                let ok = k.parts().count() == depth
                    && k.filename()
                        .and_then(|f| f.strip_suffix(".json"))
                        .is_some_and(valid_id);
                futures::future::ready(Ok(ok.then_some(k)))
            })
            .try_collect()
            .await?;
        let now = jiff::Timestamp::now();
        let mut items: Vec<Metadata> = futures::stream::iter(keys)
            .map(|k| async move {
                let read = match self.os.get(&k).await {
                    Ok(r) => {
                        let version =
                            r.meta.e_tag.clone().unwrap_or_else(|| {
                                r.meta.last_modified.timestamp_micros().to_string()
                            });
                        r.bytes().await.map(|b| (b, version))
                    }
                    Err(e) => Err(e),
                };
                match read {
                    Ok((body, version)) => match serde_json::from_slice::<Metadata>(&body) {
                        Ok(mut m) => {
                            if let Some(place) = self.place_of(&k) {
                                let (ns, pod, id) = place;
                                self.verify(&mut m, (&ns, &pod, &id), &version);
                            }
                            Ok(Some(m))
                        }
                        Err(e) => {
                            tracing::warn!(key = %k, error = %e, "unreadable recording metadata");
                            Ok(None)
                        }
                    },
                    // Deleted (retention) between the list and the read.
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .buffer_unordered(LIST_READS)
            .try_filter_map(|m| futures::future::ready(Ok(m)))
            .try_collect()
            .await?;
        for m in &mut items {
            mark_abandoned(m, now);
        }
        // Ids order by the second only: the start time orders sessions begun in the same second.
        items.sort_by_cached_key(|m| (m.start.parse::<jiff::Timestamp>().ok(), m.id.clone()));
        Ok(items)
    }

    /// Namespace, pod and id of the metadata object `k` (`NS/POD/ID.json` under the prefix).
    fn place_of(&self, k: &Key) -> Option<RecordingKey> {
        let base = self.prefix.parts().count();
        let parts: Vec<String> = k.parts().map(|p| p.as_ref().to_owned()).collect();
        let id = parts.get(base + 2)?.strip_suffix(".json")?;
        (parts.len() == base + 3)
            .then(|| (parts[base].clone(), parts[base + 1].clone(), id.to_owned()))
    }

    /// The recording each object belongs to (`ID.json`, `ID.cast`, `ID/N.part`), if any.
    fn owner(&self, o: &object_store::ObjectMeta) -> Option<RecordingKey> {
        let base = self.prefix.parts().count();
        let parts: Vec<String> = o.location.parts().map(|p| p.as_ref().to_owned()).collect();
        let third = parts.get(base + 2)?;
        let id = third
            .strip_suffix(".json")
            .or_else(|| third.strip_suffix(".cast"))
            .unwrap_or(third);
        valid_id(id).then(|| (parts[base].clone(), parts[base + 1].clone(), id.to_owned()))
    }

    /// What the store holds per recording, from one listing of every object (at most
    /// [`MAX_SCANNED`]): their sizes, which no metadata can misstate.
    pub async fn sizes(&self) -> Result<Sizes, StoreError> {
        let mut sizes = Sizes {
            complete: true,
            ..Sizes::default()
        };
        let mut objects = self.os.list(Some(&self.prefix));
        let mut seen = 0;
        while let Some(o) = objects.next().await {
            let o = o?;
            seen += 1;
            if seen > MAX_SCANNED {
                sizes.complete = false;
                break;
            }
            if let Some(k) = self.owner(&o) {
                *sizes.bytes.entry(k).or_default() += o.size;
            }
        }
        Ok(sizes)
    }

    /// The metadata of one recording, verified (`None` when there is none or it is
    /// unreadable).
    pub async fn read_meta(
        &self,
        namespace: &str,
        pod: &str,
        id: &str,
    ) -> Result<Option<Metadata>, StoreError> {
        let r = match self.os.get(&self.meta_key(namespace, pod, id)).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let version = r
            .meta
            .e_tag
            .clone()
            .unwrap_or_else(|| r.meta.last_modified.timestamp_micros().to_string());
        let body = match r.bytes().await {
            Ok(b) => b,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Ok(mut m) = serde_json::from_slice::<Metadata>(&body) else {
            return Ok(None);
        };
        self.verify(&mut m, (namespace, pod, id), &version);
        Ok(Some(m))
    }

    /// The keys of the parts the store holds for a recording, in order.
    async fn part_keys(
        &self,
        namespace: &str,
        pod: &str,
        id: &str,
    ) -> Result<Vec<Key>, StoreError> {
        let mut keys: Vec<Key> = self
            .os
            .list(Some(&self.key(&[namespace, pod, id])))
            .try_filter_map(|o| {
                let part = o
                    .location
                    .filename()
                    .is_some_and(|f| part_number(f).is_some());
                futures::future::ready(Ok(part.then_some(o.location)))
            })
            .try_collect()
            .await?;
        keys.sort();
        Ok(keys)
    }

    /// The recording itself: its parts in order (or the single file of earlier versions), as
    /// a stream read from the store a chunk at a time. `None` when there is no such recording.
    pub async fn read(
        &self,
        namespace: &str,
        pod: &str,
        id: &str,
    ) -> Result<Option<impl Stream<Item = Result<Bytes, StoreError>> + Send + use<>>, StoreError>
    {
        let mut parts = self.part_keys(namespace, pod, id).await?;
        if parts.is_empty() {
            let legacy = self.key(&[namespace, pod, &format!("{id}.cast")]);
            match self.os.head(&legacy).await {
                Ok(_) => parts.push(legacy),
                Err(object_store::Error::NotFound { .. }) => {
                    // A session that has written no part yet still has a recording: empty.
                    return match self.os.head(&self.meta_key(namespace, pod, id)).await {
                        Ok(_) => Ok(Some(futures::stream::empty().boxed())),
                        Err(object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(e),
                    };
                }
                Err(e) => return Err(e),
            }
        }
        let os = self.os.clone();
        let stream = futures::stream::iter(parts)
            .then(move |k| {
                let os = os.clone();
                async move { os.get(&k).await.map(|r| r.into_stream()) }
            })
            .try_flatten();
        Ok(Some(stream.boxed()))
    }

    /// The recording's events in a range of session time, as an asciicast v2 document (the
    /// header, then the events of the part holding `range.start` up to `range.end`;
    /// [`crate::range`]): only the parts the time table names are read, one whole part at a
    /// time (a part is at most about [`PART_BYTES`] and one batch), and reading stops at the
    /// first event past the end. `None` when there is no such recording.
    pub async fn read_range(
        &self,
        namespace: &str,
        pod: &str,
        id: &str,
        range: TimeRange,
    ) -> Result<Option<impl Stream<Item = Result<Bytes, StoreError>> + Send + use<>>, StoreError>
    {
        let meta = self.read_meta(namespace, pod, id).await?;
        let planned = meta
            .as_ref()
            .and_then(|m| m.evidence.as_ref())
            .and_then(|e| crate::range::parts_for(&e.parts, range));
        let mut keyframe = None;
        let (header, keys): (Option<Key>, Vec<Key>) = match planned {
            Some(needed) => {
                let first = *needed.start();
                if let Some(part) = meta
                    .as_ref()
                    .and_then(|m| m.evidence.as_ref())
                    .and_then(|e| e.parts.get(first))
                    .filter(|_| first > 0)
                {
                    keyframe = self.keyframe_event(namespace, pod, id, first, part).await?;
                }
                let header = (first > 0).then(|| self.part_key(namespace, pod, id, 0));
                let keys = needed
                    .filter_map(|i| u32::try_from(i).ok())
                    .map(|seq| self.part_key(namespace, pod, id, seq))
                    .collect();
                (header, keys)
            }
            None => {
                // No time table: every part from the first (or the single file of earlier
                // versions).
                let mut keys = self.part_keys(namespace, pod, id).await?;
                if keys.is_empty() {
                    let legacy = self.key(&[namespace, pod, &format!("{id}.cast")]);
                    match self.os.head(&legacy).await {
                        Ok(_) => keys.push(legacy),
                        Err(object_store::Error::NotFound { .. }) if meta.is_some() => {}
                        Err(object_store::Error::NotFound { .. }) => return Ok(None),
                        Err(e) => return Err(e),
                    }
                }
                (None, keys)
            }
        };
        struct Reading {
            os: Arc<dyn ObjectStore>,
            header: Option<Key>,
            keyframe: Option<Vec<u8>>,
            keys: std::collections::VecDeque<Key>,
            filter: crate::range::LineFilter,
            failed: bool,
        }
        let state = Reading {
            os: self.os.clone(),
            header,
            keyframe,
            keys: keys.into(),
            filter: crate::range::LineFilter::new(range),
            failed: false,
        };
        let stream = futures::stream::unfold(state, |mut st| async move {
            if st.failed {
                return None;
            }
            if let Some(key) = st.header.take() {
                // The header line alone: the part's first chunks up to its first newline.
                let read = async {
                    let mut chunks = st.os.get(&key).await?.into_stream();
                    let mut line = Vec::new();
                    while let Some(chunk) = chunks.next().await {
                        let chunk = chunk?;
                        match chunk.iter().position(|b| *b == b'\n') {
                            Some(nl) => {
                                line.extend_from_slice(&chunk[..=nl]);
                                break;
                            }
                            None => line.extend_from_slice(&chunk),
                        }
                        if line.len() > HEADER_BYTES {
                            break;
                        }
                    }
                    Ok::<_, StoreError>(line)
                };
                return Some(match read.await {
                    Ok(line) => {
                        let mut out = st.filter.push(&line);
                        out.extend(st.filter.finish_part());
                        // The screen as the first part read begins, right after the header.
                        if let Some(k) = st.keyframe.take() {
                            out.extend(k);
                        }
                        (Ok(Bytes::from(out)), st)
                    }
                    Err(e) => {
                        st.failed = true;
                        (Err(e), st)
                    }
                });
            }
            if st.filter.done() {
                return None;
            }
            let key = st.keys.pop_front()?;
            let read = async { st.os.get(&key).await?.bytes().await };
            Some(match read.await {
                Ok(data) => {
                    let mut out = st.filter.push(&data);
                    out.extend(st.filter.finish_part());
                    (Ok(Bytes::from(out)), st)
                }
                Err(e) => {
                    st.failed = true;
                    (Err(e), st)
                }
            })
        });
        Ok(Some(stream.boxed()))
    }

    /// The keyframe of part `seq` as an output event at the part's first event time, when the
    /// statement names one and the object beside the part is the one it names (a changed or
    /// missing keyframe is left out: the part still plays, from a blank screen).
    async fn keyframe_event(
        &self,
        namespace: &str,
        pod: &str,
        id: &str,
        seq: usize,
        part: &poddebug_types::evidence::PartDigest,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let (Some(want), Some(start), Ok(seq)) =
            (&part.keyframe_sha256, part.start_micros, u32::try_from(seq))
        else {
            return Ok(None);
        };
        let key = self.key(&[namespace, pod, id, &format!("{seq:08}.key")]);
        let data = match self.os.get(&key).await {
            Ok(r) => r.bytes().await?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        if crate::chain::hex(&crate::chain::sha256(&data)) != *want {
            tracing::warn!(%namespace, %pod, %id, part = seq, "a keyframe is not the one the statement names: left out");
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&data);
        // Microseconds to seconds: exact for the times a session reaches.
        Ok(Some(crate::asciicast::event_line(
            start as f64 / 1e6,
            "o",
            &text,
        )))
    }

    /// How the recording verifies against the signed statement of its metadata: every part
    /// the statement lists read from the store and hashed, one chunk at a time
    /// ([`crate::verify`]). `None` when there is no such recording, or when recordings are not
    /// signed here (or the keys are not loaded yet).
    pub async fn verification(
        &self,
        namespace: &str,
        pod: &str,
        id: &str,
    ) -> Result<Option<VerificationStatus>, StoreError> {
        let Some(signing) = self.signing.as_ref().filter(|k| k.get().is_some()) else {
            return Ok(None);
        };
        let Some(m) = self.read_meta(namespace, pod, id).await? else {
            return Ok(None);
        };
        // Signed by a key this replica does not hold yet (another replica read a rotation
        // first): the keys are read again at once, rather than the recording called tampered.
        let keys = match m.evidence.as_ref().map(|e| e.key_id.as_str()) {
            Some(key_id) if !key_id.is_empty() => signing.holding(key_id).await,
            _ => signing.get(),
        };
        let Some(keys) = keys else {
            return Ok(None);
        };
        let listed: Vec<object_store::ObjectMeta> = self
            .os
            .list(Some(&self.key(&[namespace, pod, id])))
            .try_collect()
            .await?;
        let mut parts: Vec<(u32, u64, Option<String>, i64)> = listed
            .into_iter()
            .filter_map(|o| {
                let seq = o.location.filename().and_then(part_number)?;
                Some((seq, o.size, o.e_tag, o.last_modified.timestamp_micros()))
            })
            .collect();
        parts.sort_unstable();
        let stored: Vec<u32> = parts.iter().map(|p| p.0).collect();
        let running = crate::verify::running(&m, jiff::Timestamp::now());
        let place = (namespace.to_owned(), pod.to_owned(), id.to_owned());
        let fingerprint = super::verified::Fingerprint {
            keys: keys.trusted_ids(),
            signature: m
                .evidence
                .as_ref()
                .map(|e| e.signature.clone())
                .unwrap_or_default(),
            parts,
        };
        // A recording still being written changes with every part: never reused.
        if !running && let Some(v) = self.verified.reuse(&place, &fingerprint) {
            return Ok(Some(v));
        }
        let mut v = crate::verify::Verifier::new(&m, keys.trusted(), stored, running);
        while let Some(seq) = v.next_part() {
            let mut hasher = crate::chain::Hasher::default();
            let mut chunks = match self.os.get(&self.part_key(namespace, pod, id, seq)).await {
                Ok(r) => r.into_stream(),
                // Deleted since the list: the verifier names it missing.
                Err(object_store::Error::NotFound { .. }) => break,
                Err(e) => return Err(e),
            };
            while let Some(chunk) = chunks.next().await {
                hasher.update(&chunk?);
            }
            let (size, digest) = hasher.finish();
            v.part(size, &digest);
        }
        let verdict = v.finish();
        if !running {
            self.verified.keep(place, fingerprint, verdict.clone());
        }
        Ok(Some(verdict))
    }

    /// Delete the recordings (metadata and parts) whose metadata was last written longer ago
    /// than `retention`; return how many recordings went.
    pub async fn sweep(&self, retention: Duration) -> Result<usize, StoreError> {
        let Ok(age) = i64::try_from(retention.as_secs()) else {
            return Ok(0);
        };
        let cutoff = jiff::Timestamp::now().as_second().saturating_sub(age);
        let all: Vec<object_store::ObjectMeta> =
            self.os.list(Some(&self.prefix)).try_collect().await?;
        let base = self.prefix.parts().count();
        let owner = |o: &object_store::ObjectMeta| self.owner(o);
        // Recordings are judged by their metadata (or, for the single files of earlier
        // versions, by the file), and go whole.
        let old: std::collections::HashSet<(String, String, String)> = all
            .iter()
            .filter(|o| {
                o.location.parts().count() == base + 3 && o.last_modified.timestamp() < cutoff
            })
            .filter(|o| {
                o.location
                    .filename()
                    .is_some_and(|f| f.ends_with(".json") || f.ends_with(".cast"))
            })
            .filter_map(owner)
            .collect();
        let doomed: Vec<Key> = all
            .iter()
            .filter(|o| owner(o).is_some_and(|k| old.contains(&k)))
            .map(|o| o.location.clone())
            .collect();
        let keys = futures::stream::iter(doomed.into_iter().map(Ok)).boxed();
        let _: Vec<Key> = self.os.delete_stream(keys).try_collect().await?;
        Ok(old.len())
    }
}

/// The number of the part whose object is named `name` (`NNNNNNNN.part`, eight digits).
fn part_number(name: &str) -> Option<u32> {
    let digits = name.strip_suffix(".part")?;
    (digits.len() == 8 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// A recording with no end whose metadata has not been renewed for
/// [`ABANDONED_AFTER_INTERVALS`] of its part intervals lost its recorder: it reads truncated,
/// ended when last renewed.
fn mark_abandoned(m: &mut Metadata, now: jiff::Timestamp) {
    if let Some(last) = crate::verify::abandoned(m, now) {
        m.truncated = true;
        m.end = Some(last.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_strict() {
        let id = new_id(jiff::Timestamp::UNIX_EPOCH);
        assert!(valid_id(&id), "{id}");
        assert!(id.starts_with("19700101t000000z-"));
        assert!(
            valid_id("19700101T000000Z-0123456789abcdef"),
            "earlier versions' ids"
        );
        for bad in [
            "",
            "..",
            "../../../etc/passwd",
            "19700101T000000Z-0123456789abcde/",
            "19700101T000000Z-0123456789ABCDEF",
            "19700101T000000Z-0123456789abcdef.cast",
            "19700101T000000Z-0123456789abcde",
            "1970010lT000000Z-0123456789abcdef",
            "19700101T000000Z_0123456789abcdef",
        ] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    pub(super) fn temp_store(tag: &str) -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("poddebug-{tag}-{:x}", rand::random::<u64>()));
        let key = SharedRecordKey::loaded(poddebug_storage::record_key::RecordKey::generate());
        let store = Store::dir(&dir)
            .unwrap()
            .authenticated(key, UntrustedRecords::default());
        (store, dir)
    }

    /// What was written, as a list gives it back: signed and verified.
    fn as_listed(m: &Metadata) -> Metadata {
        Metadata {
            verified: true,
            ..m.clone()
        }
    }

    fn ids(list: &[Metadata]) -> Vec<(&str, bool)> {
        list.iter().map(|m| (m.id.as_str(), m.verified)).collect()
    }

    fn meta(id: &str, start: &str) -> Metadata {
        Metadata {
            id: id.to_owned(),
            namespace: "ns".to_owned(),
            pod: "pod".to_owned(),
            start: start.to_owned(),
            ..Default::default()
        }
    }

    async fn read_all(store: &Store, id: &str) -> Option<Vec<u8>> {
        let s = store.read("ns", "pod", id).await.unwrap()?;
        let chunks: Vec<Bytes> = s.try_collect().await.unwrap();
        Some(chunks.concat())
    }

    /// moto's S3 server as CI installs it (.ci/live), started on a free loopback port; `None`
    /// when this machine has none.
    struct Moto {
        child: std::process::Child,
        endpoint: String,
    }

    impl Drop for Moto {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    async fn moto() -> Option<Moto> {
        let venv = std::env::var("MOTO_VENV").unwrap_or_else(|_| "/tmp/poddebug-moto".into());
        let bin = std::path::Path::new(&venv).join("bin/moto_server");
        if !bin.is_file() {
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let moto = Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::new();
        for _ in 0..120 {
            if http.get(&moto.endpoint).send().await.is_ok() {
                return Some(moto);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("moto did not start on {}", moto.endpoint);
    }

    #[tokio::test]
    async fn objects_are_written_with_the_server_side_encryption_asked_for() {
        let Some(moto) = moto().await else {
            eprintln!("skipped: no moto_server (.ci/live installs it in /tmp/poddebug-moto)");
            return;
        };
        let http = reqwest::Client::new();
        let bucket = format!("{}/sse", moto.endpoint);
        assert!(
            http.put(&bucket)
                .send()
                .await
                .unwrap()
                .status()
                .is_success()
        );
        for (prefix, sse, kms) in [
            ("aes", Sse::Aes256, None),
            (
                "kms",
                Sse::Kms(Some("alias/recordings".into())),
                Some("alias/recordings"),
            ),
        ] {
            let builder = object_store::aws::AmazonS3Builder::new()
                .with_bucket_name("sse")
                .with_endpoint(&moto.endpoint)
                .with_allow_http(true)
                .with_region("us-east-1")
                .with_access_key_id("test")
                .with_secret_access_key("test");
            let store = Store::s3(builder, prefix, "s3://sse", Some(&sse))
                .unwrap()
                .authenticated(
                    SharedRecordKey::loaded(poddebug_storage::record_key::RecordKey::generate()),
                    UntrustedRecords::default(),
                );
            let m = meta(&new_id(jiff::Timestamp::now()), "2026-01-01T00:00:00Z");
            store
                .write_part(&m, 0, Bytes::from_static(b"[0.5,\"o\",\"x\"]\n"))
                .await
                .unwrap();
            store.write_meta(&m).await.unwrap();
            for object in [
                format!("{prefix}/ns/pod/{}/00000000.part", m.id),
                format!("{prefix}/ns/pod/{}.json", m.id),
            ] {
                // The object's headers, as any S3 client reads them (signed: moto refuses
                // anonymous reads).
                let out = std::process::Command::new("curl")
                    .args(["-sS", "--fail", "-I", "--aws-sigv4", "aws:amz:us-east-1:s3"])
                    .args(["--user", "test:test", &format!("{bucket}/{object}")])
                    .output()
                    .unwrap();
                let h = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
                assert!(out.status.success(), "{object}: {h}");
                let header = |name: &str| {
                    h.lines()
                        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                        .map(|v| v.trim().to_owned())
                };
                assert_eq!(
                    header("x-amz-server-side-encryption").as_deref(),
                    Some(sse.header().to_ascii_lowercase().as_str()),
                    "{object}: {h}"
                );
                assert_eq!(
                    header("x-amz-server-side-encryption-aws-kms-key-id").as_deref(),
                    kms,
                    "{object}: {h}"
                );
            }
        }
    }

    #[tokio::test]
    async fn commands_someone_else_wrote_or_moved_do_not_verify() {
        let (store, dir) = temp_store("commands");
        let m = meta(&new_id(jiff::Timestamp::now()), "2026-01-01T00:00:00Z");
        let none = store
            .read_commands("ns", "pod", &m.id)
            .await
            .unwrap()
            .unwrap();
        assert!(none.items.is_empty() && none.verified, "none written yet");
        let items = vec![RecordingCommand {
            offset: 1.5,
            line: "id".into(),
            recalled: false,
        }];
        store.write_commands(&m, &items, 2).await.unwrap();
        let read = store
            .read_commands("ns", "pod", &m.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (read.items.clone(), read.dropped, read.verified),
            (items, 2, true)
        );
        // Edited in the bucket: the line changed, the MAC kept.
        let file = dir.join("ns").join("pod").join(&m.id).join(COMMANDS_FILE);
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text.replace("\"id\"", "\"ls\"")).unwrap();
        let edited = store
            .read_commands("ns", "pod", &m.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(edited.items[0].line, "ls");
        assert!(!edited.verified);
        // Another recording's commands copied over this one's do not verify either.
        let other = meta(&new_id(jiff::Timestamp::now()), "2026-01-01T00:00:00Z");
        store.write_commands(&other, &[], 0).await.unwrap();
        let theirs = dir
            .join("ns")
            .join("pod")
            .join(&other.id)
            .join(COMMANDS_FILE);
        std::fs::copy(&theirs, &file).unwrap();
        assert!(
            !store
                .read_commands("ns", "pod", &m.id)
                .await
                .unwrap()
                .unwrap()
                .verified
        );
        // The commands are the recording's: not a part, and swept with it.
        store.write_meta(&m).await.unwrap();
        assert_eq!(read_all(&store, &m.id).await.unwrap(), b"");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A recording of `minutes` parts, one a minute, each with an event a second: written as
    /// the writer writes it (time table in the statement).
    async fn timed_recording(store: &Store, minutes: u32) -> (Metadata, Vec<Vec<u8>>) {
        let store = &store.clone().signed_with(crate::keys::SharedKeys::loaded(
            crate::keys::Keys::generate().unwrap(),
        ));
        let mut m = meta(&new_id(jiff::Timestamp::now()), "2026-01-01T00:00:00Z");
        let mut parts = Vec::new();
        let mut digests = Vec::new();
        let mut screen = super::super::keyframe::Screen::new(80, 24);
        for k in 0..minutes {
            let mut data = Vec::new();
            if k == 0 {
                data.extend_from_slice(b"{\"version\":2,\"width\":80,\"height\":24}\n");
            }
            for s in 0..60 {
                let t = f64::from(k * 60 + s) + 0.5;
                data.extend(crate::asciicast::event_line(t, "o", &format!("{t}\r\n")));
            }
            let keyframe = (k > 0).then(|| screen.keyframe());
            if let Some(kf) = &keyframe {
                store
                    .write_keyframe(&m, k, Bytes::from(kf.clone()))
                    .await
                    .unwrap();
            }
            for s in 0..60 {
                let t = f64::from(k * 60 + s) + 0.5;
                screen.feed(format!("{t}\r\n").as_bytes());
            }
            let span = crate::asciicast::event_span(&data);
            digests.push(poddebug_types::evidence::PartDigest {
                bytes: data.len() as u64,
                sha256: crate::chain::hex(&crate::chain::sha256(&data)),
                start_micros: span.map(|s| s.0),
                end_micros: span.map(|s| s.1),
                keyframe_sha256: keyframe
                    .map(|kf| crate::chain::hex(&crate::chain::sha256(kf.as_bytes()))),
            });
            store
                .write_part(&m, k, Bytes::from(data.clone()))
                .await
                .unwrap();
            parts.push(data);
        }
        m.evidence = Some(poddebug_types::evidence::Evidence {
            parts: digests,
            ..Default::default()
        });
        store.write_meta(&m).await.unwrap();
        (m, parts)
    }

    async fn range(store: &Store, id: &str, start: f64, end: Option<f64>) -> String {
        let s = store
            .read_range("ns", "pod", id, TimeRange { start, end })
            .await
            .unwrap()
            .unwrap();
        let chunks: Vec<Bytes> = s.try_collect().await.unwrap();
        String::from_utf8(chunks.concat()).unwrap()
    }

    #[tokio::test]
    async fn a_time_range_reads_the_parts_that_hold_it_and_no_other() {
        let (store, dir) = temp_store("range");
        let (m, parts) = timed_recording(&store, 12).await;
        let id = m.id.clone();
        let whole = String::from_utf8(parts.concat()).unwrap();
        assert_eq!(range(&store, &id, 0.0, None).await, whole);
        // Parts 1, 2 and 4..12 gone from the store: a range within part 3 does not notice.
        for k in [1u32, 2, 4, 5, 6, 7, 8, 9, 10, 11] {
            let path = dir.join(format!("ns/pod/{id}/{k:08}.part"));
            std::fs::remove_file(path).unwrap();
        }
        let doc = range(&store, &id, 200.0, Some(210.0)).await;
        let lines: Vec<&str> = doc.lines().collect();
        assert!(lines[0].starts_with("{\"version\":2"), "{doc}");
        // The keyframe (the screen as part 3 begins: the last 24 lines of part 2), then from
        // the part's start (the screen at 200 s is drawn by what came before in it) to the end
        // asked for.
        let (t, code, screen): (f64, String, String) = serde_json::from_str(lines[1]).unwrap();
        assert_eq!((t, code.as_str()), (180.5, "o"));
        assert!(
            screen.contains("179.5") && screen.contains("157.5") && !screen.contains("119.5"),
            "{screen}"
        );
        assert_eq!(lines[2], "[180.5,\"o\",\"180.5\\r\\n\"]");
        assert_eq!(lines.last(), Some(&"[209.5,\"o\",\"209.5\\r\\n\"]"));
        assert_eq!(lines.len(), 2 + 30);
        // A keyframe changed in the store is not the one the statement names: left out.
        std::fs::write(dir.join(format!("ns/pod/{id}/00000003.key")), "forged").unwrap();
        let doc = range(&store, &id, 200.0, Some(210.0)).await;
        assert!(!doc.contains("forged") && !doc.contains("179.5"), "{doc}");
        assert_eq!(doc.lines().count(), 1 + 30);
        // The whole recording cannot be read any more; a range past its end reads part 11 only
        // (gone): an error, not a panic or a hang.
        assert!(
            store
                .read_range(
                    "ns",
                    "pod",
                    &id,
                    TimeRange {
                        start: 1e6,
                        end: None
                    }
                )
                .await
                .unwrap()
                .unwrap()
                .try_collect::<Vec<Bytes>>()
                .await
                .is_err()
        );
        assert!(
            store
                .read_range(
                    "ns",
                    "pod",
                    "20260101T000000Z-0000000000000009",
                    TimeRange::default()
                )
                .await
                .unwrap()
                .is_none()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_recording_without_a_time_table_is_read_from_its_start_up_to_the_end() {
        let (store, dir) = temp_store("range-legacy");
        let (mut m, parts) = timed_recording(&store, 3).await;
        if let Some(e) = m.evidence.as_mut() {
            for p in &mut e.parts {
                p.start_micros = None;
                p.end_micros = None;
            }
        }
        store.write_meta(&m).await.unwrap();
        let doc = range(&store, &m.id, 100.0, Some(70.0)).await;
        let want: String = String::from_utf8(parts[0].clone())
            .unwrap()
            .lines()
            .chain(
                String::from_utf8(parts[1].clone())
                    .unwrap()
                    .lines()
                    .take(10),
            )
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(doc, want);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn the_list_is_in_start_order_within_a_second() {
        let (store, dir) = temp_store("list");
        // The later session has the smaller id.
        let mut later = meta(
            "20260101T000000Z-0000000000000001",
            "2026-01-01T00:00:00.9Z",
        );
        let mut earlier = meta("20260101T000000Z-ffffffffffffffff", "2026-01-01T00:00:00Z");
        later.end = Some("2026-01-01T00:01:00Z".into());
        earlier.end = Some("2026-01-01T00:01:00Z".into());
        store.write_meta(&later).await.unwrap();
        store.write_meta(&earlier).await.unwrap();
        let mut other = earlier.clone();
        other.namespace = "other".into();
        store.write_meta(&other).await.unwrap();
        let listed = store.list(Some("ns"), Some("pod")).await.unwrap();
        assert!(listed.iter().all(|m| m.mac.is_some()));
        let listed: Vec<Metadata> = listed
            .into_iter()
            .map(|m| Metadata { mac: None, ..m })
            .collect();
        assert_eq!(listed, vec![as_listed(&earlier), as_listed(&later)]);
        assert_eq!(store.list(Some("ns"), None).await.unwrap().len(), 2);
        assert_eq!(store.list(None, None).await.unwrap().len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_recording_is_its_parts_in_order_and_an_abandoned_one_reads_truncated() {
        let (store, dir) = temp_store("parts");
        let m = meta(&new_id(jiff::Timestamp::now()), "2020-01-01T00:00:00Z");
        store.write_meta(&m).await.unwrap();
        assert_eq!(read_all(&store, &m.id).await.unwrap(), b"");
        for (seq, text) in [(1u32, "b"), (0, "a"), (10, "c")] {
            store.write_part(&m, seq, Bytes::from(text)).await.unwrap();
        }
        assert_eq!(read_all(&store, &m.id).await.unwrap(), b"abc");
        assert!(
            read_all(&store, "20260101T000000Z-0000000000000009")
                .await
                .is_none()
        );
        // No end, not renewed since 2020: its recorder is gone.
        let listed = store.list(Some("ns"), Some("pod")).await.unwrap();
        assert!(listed[0].truncated, "{listed:?}");
        assert_eq!(listed[0].end.as_deref(), Some("2020-01-01T00:00:00Z"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn sweep_removes_only_old_recordings_whole() {
        let (store, dir) = temp_store("sweep");
        let pod = dir.join("ns").join("pod");
        let old = meta(&new_id(jiff::Timestamp::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let young = meta(&new_id(jiff::Timestamp::now()), "2026-01-01T00:00:00Z");
        for m in [&old, &young] {
            store.write_meta(m).await.unwrap();
            store
                .write_part(m, 0, Bytes::from_static(b"x"))
                .await
                .unwrap();
        }
        let legacy = new_id(jiff::Timestamp::UNIX_EPOCH);
        std::fs::write(pod.join(format!("{legacy}.cast")), b"x").unwrap();
        let day_ago = std::time::SystemTime::now() - Duration::from_secs(86_400);
        for f in [
            pod.join(format!("{}.json", old.id)),
            pod.join(format!("{legacy}.cast")),
        ] {
            std::fs::File::options()
                .write(true)
                .open(&f)
                .unwrap()
                .set_modified(day_ago)
                .unwrap();
        }
        std::fs::write(pod.join("unrelated"), b"x").unwrap();
        assert_eq!(store.sweep(Duration::from_secs(3600)).await.unwrap(), 2);
        assert!(read_all(&store, &old.id).await.is_none());
        assert!(read_all(&store, &legacy).await.is_none());
        assert_eq!(read_all(&store, &young.id).await.unwrap(), b"x");
        assert!(pod.join("unrelated").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn metadata_someone_else_wrote_or_moved_is_listed_unverified_and_counted_once() {
        let (store, dir) = temp_store("forged");
        let untrusted = UntrustedRecords::default();
        let key = store.key.clone();
        let store = store.authenticated(key, untrusted.clone());
        let pod = dir.join("ns").join("pod");
        let file = |id: &str| pod.join(format!("{id}.json"));
        let good = meta(&new_id(jiff::Timestamp::now()), "2026-01-01T00:00:00Z");
        let tampered = meta(&new_id(jiff::Timestamp::now()), "2026-01-01T00:00:00Z");
        for m in [&good, &tampered] {
            store.write_meta(m).await.unwrap();
        }
        let signed = |id: &str| -> Metadata {
            serde_json::from_slice(&std::fs::read(file(id)).unwrap()).unwrap()
        };
        let put = |id: &str, m: &Metadata| {
            std::fs::write(file(id), serde_json::to_vec(m).unwrap()).unwrap()
        };
        // Its user changed; without a MAC; the good one copied to another id (as is, and with
        // the id changed); another key's MAC.
        put(
            &tampered.id,
            &Metadata {
                user: "mallory".into(),
                ..signed(&tampered.id)
            },
        );
        let (unsigned, copied, renamed, foreign) = (
            new_id(jiff::Timestamp::now()),
            new_id(jiff::Timestamp::now()),
            new_id(jiff::Timestamp::now()),
            new_id(jiff::Timestamp::now()),
        );
        put(
            &unsigned,
            &Metadata {
                mac: None,
                ..meta(&unsigned, "2026-01-01T00:00:00Z")
            },
        );
        put(&copied, &signed(&good.id));
        put(
            &renamed,
            &Metadata {
                id: renamed.clone(),
                ..signed(&good.id)
            },
        );
        let (other, other_dir) = temp_store("other-key");
        other
            .write_meta(&meta(&foreign, "2026-01-01T00:00:00Z"))
            .await
            .unwrap();
        std::fs::copy(
            other_dir
                .join("ns")
                .join("pod")
                .join(format!("{foreign}.json")),
            file(&foreign),
        )
        .unwrap();
        for _ in 0..2 {
            let listed = store.list(Some("ns"), None).await.unwrap();
            let verified = |id: &str| {
                let mut v: Vec<bool> = listed
                    .iter()
                    .filter(|m| m.id == id)
                    .map(|m| m.verified)
                    .collect();
                v.sort();
                v
            };
            // The copy as is names the good one's id: listed twice, once unverified.
            assert_eq!(verified(&good.id), [false, true], "{:?}", ids(&listed));
            for id in [&tampered.id, &unsigned, &renamed, &foreign] {
                assert_eq!(verified(id), [false], "{id}: {:?}", ids(&listed));
            }
        }
        assert_eq!(
            untrusted.get(RecordKind::Recording),
            5,
            "each version once, however often listed"
        );
        let read = store
            .read_meta("ns", "pod", &good.id)
            .await
            .unwrap()
            .unwrap();
        assert!(read.verified);
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&other_dir).unwrap();
    }

    #[tokio::test]
    async fn sizes_are_the_objects_of_each_recording() {
        let (store, dir) = temp_store("sizes");
        let a = meta(&new_id(jiff::Timestamp::now()), "2026-01-01T00:00:00Z");
        let b = Metadata {
            pod: "other".into(),
            ..meta(&new_id(jiff::Timestamp::now()), "2026-01-01T00:00:00Z")
        };
        for m in [&a, &b] {
            store.write_meta(m).await.unwrap();
        }
        store
            .write_part(&a, 0, Bytes::from(vec![1; 1000]))
            .await
            .unwrap();
        store
            .write_part(&a, 1, Bytes::from(vec![1; 500]))
            .await
            .unwrap();
        std::fs::write(dir.join("ns").join("unrelated"), b"x").unwrap();
        let sizes = store.sizes().await.unwrap();
        assert!(sizes.complete);
        let meta_len = |m: &Metadata| {
            std::fs::metadata(
                dir.join(&m.namespace)
                    .join(&m.pod)
                    .join(format!("{}.json", m.id)),
            )
            .unwrap()
            .len()
        };
        let key = |m: &Metadata| (m.namespace.clone(), m.pod.clone(), m.id.clone());
        assert_eq!(sizes.bytes.len(), 2, "{:?}", sizes.bytes);
        assert_eq!(sizes.bytes[&key(&a)], 1500 + meta_len(&a));
        assert_eq!(sizes.bytes[&key(&b)], meta_len(&b));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn store_urls() {
        assert!(Store::from_url("file://relative/dir").is_err());
        for (flag, sse) in [
            ("AES256", Sse::Aes256),
            ("aws:kms", Sse::Kms(None)),
            ("aws:kms:dsse", Sse::DsseKms(None)),
            (
                "aws:kms:arn:aws:kms:eu-west-1:1:key/k",
                Sse::Kms(Some("arn:aws:kms:eu-west-1:1:key/k".into())),
            ),
            ("aws:kms:dsse:k1", Sse::DsseKms(Some("k1".into()))),
        ] {
            assert_eq!(flag.parse::<Sse>(), Ok(sse), "{flag}");
        }
        for bad in ["", "aes256", "aws:kms:", "aws:kms:dsse:", "sse-c"] {
            assert!(bad.parse::<Sse>().is_err(), "{bad}");
        }
        assert!(
            Store::from_url("gopher://x")
                .unwrap_err()
                .contains("unsupported store")
        );
        assert!(
            Store::from_url("s3:///prefix")
                .unwrap_err()
                .contains("no bucket")
        );
    }
}
