//! Recordings of debug sessions: read one recording's metadata (`DebugRecording`), its bytes
//! (whole, or by session time for a player), its evidence, and the public keys recordings are
//! signed with — what a verifier that does not trust the server needs
//! (`poddebug-recording`'s `verify::StreamVerifier` checks them).

use futures::AsyncBufRead;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use poddebug_types::Recording;
use poddebug_types::evidence::{RecordingEvidence, RecordingKeyList};
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

const GV: &str = "/apis/poddebug.dev/v1alpha1";

fn esc(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

/// The part of a recording to read, by session time in seconds: `start` alone plays from
/// there to the end; neither reads the whole recording.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RecordingRange {
    /// Session time to play from: the answer begins with the screen as the part of the
    /// recording that holds it began (its keyframe), then that part from its start (its
    /// events before `start` draw the screen as it was).
    pub start: Option<f64>,
    /// Session time to stop at.
    pub end: Option<f64>,
}

/// The recordings of a namespace.
#[derive(Clone)]
pub struct Recordings {
    client: kube::Client,
    namespace: String,
}

impl std::fmt::Debug for Recordings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recordings")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

fn get_request(uri: String) -> Result<http::Request<Vec<u8>>> {
    http::Request::builder()
        .method(http::Method::GET)
        .uri(uri)
        .body(Vec::new())
        .map_err(|e| Error::InvalidParams(e.to_string()))
}

impl Recordings {
    /// The recordings of namespace `ns`.
    pub fn new(client: kube::Client, ns: &str) -> Self {
        Recordings {
            client,
            namespace: ns.to_owned(),
        }
    }

    async fn get_json<T: DeserializeOwned>(&self, uri: String) -> Result<T> {
        let text = self.client.request_text(get_request(uri)?).await?;
        serde_json::from_str(&text).map_err(Error::Decode)
    }

    fn file(&self, pod: &str, id: &str) -> String {
        format!(
            "{GV}/namespaces/{}/pods/{}/recordings/{}",
            esc(&self.namespace),
            esc(pod),
            esc(id)
        )
    }

    /// Recording `id` as an object (`debugrecordings/ID`), with the server's own
    /// `status.verification`.
    pub async fn get(&self, id: &str) -> Result<Recording> {
        self.get_json(format!(
            "{GV}/namespaces/{}/debugrecordings/{}",
            esc(&self.namespace),
            esc(id)
        ))
        .await
    }

    /// The metadata of recording `id` of pod `pod` as stored and signed.
    pub async fn evidence(&self, pod: &str, id: &str) -> Result<RecordingEvidence> {
        self.get_json(format!("{}/evidence", self.file(pod, id)))
            .await
    }

    /// The bytes of recording `id` of pod `pod` (asciicast v2), as they stream in.
    pub async fn bytes(&self, pod: &str, id: &str) -> Result<impl AsyncBufRead + use<>> {
        Ok(self
            .client
            .request_stream(get_request(self.file(pod, id))?)
            .await?)
    }

    /// Recording `id` of pod `pod` as asciicast v2 (the header line, then one event a line),
    /// streamed: whole, or the range of it a player seeking to `range.start` needs.
    pub async fn read(
        &self,
        pod: &str,
        id: &str,
        range: &RecordingRange,
    ) -> Result<impl AsyncBufRead + use<>> {
        let mut uri = self.file(pod, id);
        let query: Vec<String> = [("start", range.start), ("end", range.end)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
            .collect();
        if !query.is_empty() {
            uri.push('?');
            uri.push_str(&query.join("&"));
        }
        Ok(self.client.request_stream(get_request(uri)?).await?)
    }

    /// The public keys recordings are signed with (`recordingkeys`, cluster-scoped).
    pub async fn keys(&self) -> Result<RecordingKeyList> {
        self.get_json(format!("{GV}/recordingkeys")).await
    }
}
