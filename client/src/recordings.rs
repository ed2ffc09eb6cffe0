//! Session recordings of a pod: reading one (asciicast v2) whole or by session time, for a
//! player.

use futures::AsyncBufRead;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

use crate::error::{Error, Result};

const GV: &str = "/apis/poddebug.dev/v1alpha1";

fn esc(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

/// The part of a recording to read, by session time in seconds: `start` alone plays from
/// there to the end; neither reads the whole recording.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RecordingRange {
    /// Session time to play from: the answer begins with the part of the recording that
    /// holds it (its events before `start` draw the screen as it was).
    pub start: Option<f64>,
    /// Session time to stop at.
    pub end: Option<f64>,
}

/// The recordings of the pods of one namespace.
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

impl Recordings {
    /// The recordings of namespace `ns`.
    pub fn new(client: kube::Client, ns: &str) -> Self {
        Recordings {
            client,
            namespace: ns.to_owned(),
        }
    }

    /// Recording `id` of pod `pod` as asciicast v2 (the header line, then one event a line),
    /// streamed: whole, or the range of it a player seeking to `range.start` needs.
    pub async fn read(
        &self,
        pod: &str,
        id: &str,
        range: &RecordingRange,
    ) -> Result<impl AsyncBufRead + use<>> {
        let mut path = format!(
            "{GV}/namespaces/{}/pods/{}/recordings/{}",
            esc(&self.namespace),
            esc(pod),
            esc(id)
        );
        let query: Vec<String> = [("start", range.start), ("end", range.end)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
            .collect();
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query.join("&"));
        }
        let req = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| Error::InvalidParams(e.to_string()))?;
        Ok(self.client.request_stream(req).await?)
    }
}
