//! A recording's search index in the store (`NAMESPACE/POD/ID/index`): its first line the
//! record key's MAC ([`Purpose::RecordingIndex`]) over the recording's place and the rest, the
//! rest the index as JSON ([`crate::index`]). The MAC binds the index to its place: an index
//! someone else wrote, changed, or copied from another recording does not verify, and is
//! ignored (counted in `poddebug_untrusted_records_total{kind="recording"}`), never searched.

use object_store::{ObjectStoreExt, PutPayload};
use poddebug_storage::RecordKind;
use poddebug_storage::record_key::Purpose;

use super::{Key, Metadata, Store, StoreError};
use crate::index::Searchable;

/// Name of the index object in a recording's folder.
pub(super) const INDEX_FILE: &str = "index";
/// Version of what an index MAC covers.
const INDEX_CONTENT: &str = "recording-index/v1";
/// Largest index object read back: what the writer writes holds at most
/// [`crate::index::MAX_TEXT`] of text, and its filters and JSON escaping take less again
/// than that, short of text made all of escaped characters.
pub const MAX_INDEX_OBJECT: u64 = 4 << 20;

/// What an index MAC covers: the recording's place, then the index as written.
fn index_content((namespace, pod, id): (&str, &str, &str), body: &[u8]) -> Vec<u8> {
    let mut content = serde_json::to_vec(&(INDEX_CONTENT, namespace, pod, id)).unwrap_or_default();
    content.push(b'\n');
    content.extend_from_slice(body);
    content
}

/// What reading a recording's index gave.
#[derive(Debug)]
pub enum IndexRead {
    /// The index, verified.
    Found(Box<Searchable>),
    /// There is no index (a recording of an earlier version, or one that has indexed nothing
    /// yet).
    Missing,
    /// There is an index, but it is not to be trusted or read: no MAC, a MAC that does not
    /// verify, too large, or unreadable. Counted and logged.
    Ignored,
}

impl Store {
    fn index_key(&self, namespace: &str, pod: &str, id: &str) -> Key {
        self.key(&[namespace, pod, id, INDEX_FILE])
    }

    /// Write the search index of a recording (`body`, its JSON), signed (one PUT). Fails
    /// while the record key is not loaded.
    pub async fn write_index(&self, m: &Metadata, body: &[u8]) -> Result<(), StoreError> {
        let key = self.record_key()?;
        let place = (m.namespace.as_str(), m.pod.as_str(), m.id.as_str());
        let mac = key.sign(Purpose::RecordingIndex, &index_content(place, body));
        let mut object = Vec::with_capacity(mac.len() + 1 + body.len());
        object.extend_from_slice(mac.as_bytes());
        object.push(b'\n');
        object.extend_from_slice(body);
        self.os
            .put(
                &self.index_key(&m.namespace, &m.pod, &m.id),
                PutPayload::from(object),
            )
            .await
            .map(|_| ())
    }

    /// The search index of one recording, its MAC verified against where it was read (one
    /// GET of at most [`MAX_INDEX_OBJECT`] bytes; the recording itself is never read).
    pub async fn read_index(
        &self,
        namespace: &str,
        pod: &str,
        id: &str,
    ) -> Result<IndexRead, StoreError> {
        let k = self.index_key(namespace, pod, id);
        let r = match self.os.get(&k).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(IndexRead::Missing),
            Err(e) => return Err(e),
        };
        let version = r
            .meta
            .e_tag
            .clone()
            .unwrap_or_else(|| r.meta.last_modified.timestamp_micros().to_string());
        let place = format!("{namespace}/{pod}/{id}/{INDEX_FILE}");
        let ignored = |why: &str| {
            self.untrusted
                .note(RecordKind::Recording, &place, &version, why);
            Ok(IndexRead::Ignored)
        };
        if r.meta.size > MAX_INDEX_OBJECT {
            return ignored("the index is larger than any this server writes");
        }
        let object = match r.bytes().await {
            Ok(b) => b,
            Err(object_store::Error::NotFound { .. }) => return Ok(IndexRead::Missing),
            Err(e) => return Err(e),
        };
        let Some(newline) = object.iter().position(|b| *b == b'\n') else {
            return ignored("no MAC");
        };
        let (mac, body) = (&object[..newline], &object[newline + 1..]);
        let verified = std::str::from_utf8(mac).is_ok_and(|mac| {
            self.key.get().is_some_and(|key| {
                key.verify(
                    Purpose::RecordingIndex,
                    &index_content((namespace, pod, id), body),
                    mac,
                )
            })
        });
        if !verified {
            return ignored("the MAC does not verify");
        }
        match Searchable::load(body) {
            Ok(s) => Ok(IndexRead::Found(Box::new(s))),
            Err(e) => {
                tracing::warn!(key = %k, error = %e, "unreadable recording index");
                ignored("unreadable")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::new_id;
    use super::super::tests::temp_store;
    use super::*;
    use crate::index::{IndexBuilder, Needle};
    use poddebug_types::RecordingCommand;

    fn meta(namespace: &str, pod: &str) -> Metadata {
        Metadata {
            id: new_id(jiff::Timestamp::now()),
            namespace: namespace.to_owned(),
            pod: pod.to_owned(),
            ..Default::default()
        }
    }

    fn found(r: IndexRead) -> Option<u64> {
        match r {
            IndexRead::Found(s) => Some(s.search(&Needle::new("shadow").ok()?, 10).total),
            _ => None,
        }
    }

    #[tokio::test]
    async fn an_index_someone_else_wrote_or_moved_is_ignored() {
        let (store, dir) = temp_store("index");
        let m = meta("ns", "pod");
        assert!(matches!(
            store.read_index("ns", "pod", &m.id).await.unwrap(),
            IndexRead::Missing
        ));
        let mut b = IndexBuilder::new();
        b.command(&RecordingCommand {
            offset: 1.0,
            line: "cat /etc/shadow".into(),
            recalled: false,
        });
        let body = b.to_json();
        store.write_index(&m, &body).await.unwrap();
        assert_eq!(
            found(store.read_index("ns", "pod", &m.id).await.unwrap()),
            Some(1)
        );
        let path = dir.join("ns").join("pod").join(&m.id).join(INDEX_FILE);
        // Changed in place: the MAC no longer verifies.
        let written = std::fs::read(&path).unwrap();
        let changed = String::from_utf8(written.clone())
            .unwrap()
            .replace("shadow", "shadoW");
        std::fs::write(&path, changed).unwrap();
        assert!(matches!(
            store.read_index("ns", "pod", &m.id).await.unwrap(),
            IndexRead::Ignored
        ));
        // Written without a MAC.
        std::fs::write(&path, &body).unwrap();
        assert!(matches!(
            store.read_index("ns", "pod", &m.id).await.unwrap(),
            IndexRead::Ignored
        ));
        // Another recording's index copied over this one's.
        let other = meta("ns", "pod");
        store.write_index(&other, &body).await.unwrap();
        let theirs = dir.join("ns").join("pod").join(&other.id).join(INDEX_FILE);
        std::fs::copy(&theirs, &path).unwrap();
        assert!(matches!(
            store.read_index("ns", "pod", &m.id).await.unwrap(),
            IndexRead::Ignored
        ));
        // Too large to be one of ours.
        std::fs::write(&path, vec![b' '; MAX_INDEX_OBJECT as usize + 1]).unwrap();
        assert!(matches!(
            store.read_index("ns", "pod", &m.id).await.unwrap(),
            IndexRead::Ignored
        ));
        let _ = std::fs::remove_dir_all(dir);
    }
}
