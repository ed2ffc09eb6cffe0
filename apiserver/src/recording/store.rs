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
//!   `truncated`).
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

/// The metadata of one recording (the `ID.json` object and one item of the list).
pub type Metadata = poddebug_types::RecordingRecord;

/// A part is written once this much of the recording has gathered, or once the part interval
/// (`--recording-part-interval`) has passed since the previous one, whichever comes first.
pub const PART_BYTES: usize = 1 << 20;
/// A recording whose metadata was not renewed for this many part intervals, and that has no
/// end, lost its recorder (the replica died): it reads `truncated`.
pub const ABANDONED_AFTER_INTERVALS: u64 = 6;
/// Metadata objects read at once when listing.
const LIST_READS: usize = 16;

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

/// The store of recordings.
#[derive(Clone)]
pub struct Store {
    os: Arc<dyn ObjectStore>,
    prefix: Key,
    url: String,
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
            });
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad("no bucket (s3://BUCKET/PREFIX)".into()));
            }
            let s3 = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .build()
                .map_err(|e| bad(e.to_string()))?;
            let prefix = Key::parse(prefix.trim_matches('/')).map_err(|e| bad(e.to_string()))?;
            return Ok(Store {
                os: Arc::new(s3),
                prefix,
                url: url.to_owned(),
            });
        }
        Err(bad(
            "unsupported store: give file:///DIR or s3://BUCKET/PREFIX".into(),
        ))
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

    /// Write the metadata (one PUT: readers see the old object or the new, never half).
    pub async fn write_meta(&self, m: &Metadata) -> Result<(), StoreError> {
        let body = serde_json::to_vec(m).map_err(|e| object_store::Error::Generic {
            store: "recordings",
            source: Box::new(e),
        })?;
        self.os
            .put(
                &self.meta_key(&m.namespace, &m.pod, &m.id),
                PutPayload::from(body),
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
                    Ok(r) => r.bytes().await,
                    Err(e) => Err(e),
                };
                match read {
                    Ok(body) => match serde_json::from_slice::<Metadata>(&body) {
                        Ok(m) => Ok(Some(m)),
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

    /// The recording itself: its parts in order (or the single file of earlier versions), as
    /// a stream read from the store a chunk at a time. `None` when there is no such recording.
    pub async fn read(
        &self,
        namespace: &str,
        pod: &str,
        id: &str,
    ) -> Result<Option<impl Stream<Item = Result<Bytes, StoreError>> + Send + use<>>, StoreError>
    {
        let mut parts: Vec<Key> = self
            .os
            .list(Some(&self.key(&[namespace, pod, id])))
            .try_filter_map(|o| {
                let part = o.location.filename().is_some_and(|f| f.ends_with(".part"));
                futures::future::ready(Ok(part.then_some(o.location)))
            })
            .try_collect()
            .await?;
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
        parts.sort();
        let os = self.os.clone();
        let stream = futures::stream::iter(parts)
            .then(move |k| {
                let os = os.clone();
                async move { os.get(&k).await.map(|r| r.into_stream()) }
            })
            .try_flatten();
        Ok(Some(stream.boxed()))
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
        // NS, POD and the recording id an object belongs to (`ID.json`, `ID.cast`, `ID/N.part`).
        let owner = |o: &object_store::ObjectMeta| -> Option<(String, String, String)> {
            let parts: Vec<String> = o.location.parts().map(|p| p.as_ref().to_owned()).collect();
            let third = parts.get(base + 2)?;
            let id = third
                .strip_suffix(".json")
                .or_else(|| third.strip_suffix(".cast"))
                .unwrap_or(third);
            valid_id(id).then(|| (parts[base].clone(), parts[base + 1].clone(), id.to_owned()))
        };
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

/// A recording with no end whose metadata has not been renewed for
/// [`ABANDONED_AFTER_INTERVALS`] of its part intervals lost its recorder: it reads truncated,
/// ended when last renewed.
fn mark_abandoned(m: &mut Metadata, now: jiff::Timestamp) {
    if m.end.is_some() {
        return;
    }
    let last = m
        .renewed
        .as_deref()
        .unwrap_or(m.start.as_str())
        .parse::<jiff::Timestamp>();
    let interval = m.part_interval_seconds.unwrap_or(5).max(1);
    let limit = i64::try_from(interval * ABANDONED_AFTER_INTERVALS).unwrap_or(i64::MAX);
    if let Ok(last) = last
        && now.duration_since(last).as_secs() > limit
    {
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

    fn temp_store(tag: &str) -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("poddebug-{tag}-{:x}", rand::random::<u64>()));
        (Store::dir(&dir).unwrap(), dir)
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
        assert_eq!(
            store.list(Some("ns"), Some("pod")).await.unwrap(),
            vec![earlier.clone(), later.clone()]
        );
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

    #[test]
    fn store_urls() {
        assert!(Store::from_url("file://relative/dir").is_err());
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
