//! Where recordings live: `DIR/NAMESPACE/POD/ID.cast` and, beside it, `ID.json` (the metadata
//! the list is served from, so listing never reads a recording). Ids are made here and checked
//! strictly before they touch a path; namespace and pod names were checked as DNS names by the
//! handler chain before any handler ran.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The metadata of one recording (the `ID.json` sidecar and one item of the list).
pub type Metadata = poddebug_types::Recording;

/// A fresh id: the start time (UTC, to the second) and 64 random bits, `20260102T030405Z-0123456789abcdef`.
pub fn new_id(start: jiff::Timestamp) -> String {
    let stamp = start.strftime("%Y%m%dT%H%M%SZ");
    format!("{stamp}-{:016x}", rand::random::<u64>())
}

/// Whether `id` has exactly the shape [`new_id`] makes (so it can name no other file).
pub fn valid_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 33
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'Z'
        && b[16] == b'-'
        && b[17..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

/// The recording directory.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// A store rooted at `dir`.
    pub fn new(dir: PathBuf) -> Store {
        Store { dir }
    }

    /// The directory of one pod's recordings.
    pub fn pod_dir(&self, namespace: &str, pod: &str) -> PathBuf {
        self.dir.join(namespace).join(pod)
    }

    /// The recording file of a (valid) id.
    pub fn cast_path(&self, namespace: &str, pod: &str, id: &str) -> PathBuf {
        self.pod_dir(namespace, pod).join(format!("{id}.cast"))
    }

    /// The metadata file of a (valid) id.
    pub fn meta_path(&self, namespace: &str, pod: &str, id: &str) -> PathBuf {
        self.pod_dir(namespace, pod).join(format!("{id}.json"))
    }

    /// Write the metadata through a temporary file and a rename, so a reader never sees half.
    pub async fn write_meta(&self, m: &Metadata) -> std::io::Result<()> {
        let path = self.meta_path(&m.namespace, &m.pod, &m.id);
        let tmp = path.with_extension("json.tmp");
        let body = serde_json::to_vec(m).map_err(std::io::Error::other)?;
        tokio::fs::write(&tmp, body).await?;
        tokio::fs::rename(&tmp, &path).await
    }

    /// The metadata of a pod's recordings, oldest first. Unreadable sidecars are skipped.
    pub async fn list(&self, namespace: &str, pod: &str) -> std::io::Result<Vec<Metadata>> {
        let dir = self.pod_dir(namespace, pod);
        let mut entries = match tokio::fs::read_dir(&dir).await {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut items = Vec::new();
        while let Some(entry) = entries.next_entry().await? {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if !valid_id(id) {
                continue;
            }
            match tokio::fs::read(entry.path()).await {
                Ok(body) => match serde_json::from_slice::<Metadata>(&body) {
                    Ok(m) if m.id == id => items.push(m),
                    _ => {
                        tracing::warn!(path = %entry.path().display(), "unreadable recording metadata")
                    }
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        // Ids order by the second only: the start time orders sessions begun in the same second.
        items.sort_by_cached_key(|m| (m.start.parse::<jiff::Timestamp>().ok(), m.id.clone()));
        Ok(items)
    }

    /// Delete recordings (and their metadata) last written longer ago than `retention`; return
    /// how many files went.
    pub async fn sweep(&self, retention: Duration) -> usize {
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || sweep_blocking(&dir, retention))
            .await
            .unwrap_or(0)
    }
}

fn sweep_blocking(dir: &Path, retention: Duration) -> usize {
    let Some(cutoff) = SystemTime::now().checked_sub(retention) else {
        return 0;
    };
    let mut removed = 0;
    let children = |p: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(p)
            .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    for ns in children(dir).into_iter().filter(|p| p.is_dir()) {
        for pod in children(&ns).into_iter().filter(|p| p.is_dir()) {
            for file in children(&pod) {
                let is_recording = file
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(".cast").or_else(|| n.strip_suffix(".json")))
                    .is_some_and(valid_id);
                let old = std::fs::metadata(&file)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t < cutoff);
                if is_recording && old && std::fs::remove_file(&file).is_ok() {
                    removed += 1;
                }
            }
            // Only succeeds when empty.
            let _ = std::fs::remove_dir(&pod);
        }
        let _ = std::fs::remove_dir(&ns);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_strict() {
        let id = new_id(jiff::Timestamp::UNIX_EPOCH);
        assert!(valid_id(&id), "{id}");
        assert!(id.starts_with("19700101T000000Z-"));
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

    #[tokio::test]
    async fn the_list_is_in_start_order_within_a_second() {
        let dir = std::env::temp_dir().join(format!("poddebug-list-{:x}", rand::random::<u64>()));
        let store = Store::new(dir.clone());
        std::fs::create_dir_all(store.pod_dir("ns", "pod")).unwrap();
        let meta = |id: &str, start: &str| Metadata {
            id: id.to_owned(),
            namespace: "ns".to_owned(),
            pod: "pod".to_owned(),
            start: start.to_owned(),
            ..Default::default()
        };
        // The later session has the smaller id.
        let later = meta(
            "20260101T000000Z-0000000000000001",
            "2026-01-01T00:00:00.9Z",
        );
        let earlier = meta("20260101T000000Z-ffffffffffffffff", "2026-01-01T00:00:00Z");
        store.write_meta(&later).await.unwrap();
        store.write_meta(&earlier).await.unwrap();
        assert_eq!(store.list("ns", "pod").await.unwrap(), vec![earlier, later]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn sweep_removes_only_old_recordings() {
        let dir = std::env::temp_dir().join(format!("poddebug-sweep-{:x}", rand::random::<u64>()));
        let store = Store::new(dir.clone());
        let pod = store.pod_dir("ns", "pod");
        std::fs::create_dir_all(&pod).unwrap();
        let old = new_id(jiff::Timestamp::UNIX_EPOCH);
        let young = new_id(jiff::Timestamp::now());
        let day_ago = SystemTime::now() - Duration::from_secs(86_400);
        for (id, ext) in [(&old, "cast"), (&old, "json"), (&young, "cast")] {
            let p = pod.join(format!("{id}.{ext}"));
            std::fs::write(&p, b"x").unwrap();
            if id == &old {
                std::fs::File::options()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .set_modified(day_ago)
                    .unwrap();
            }
        }
        std::fs::write(pod.join("unrelated"), b"x").unwrap();
        assert_eq!(store.sweep(Duration::from_secs(3600)).await, 2);
        assert!(pod.join(format!("{young}.cast")).exists());
        assert!(pod.join("unrelated").exists());
        assert!(!pod.join(format!("{old}.cast")).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
