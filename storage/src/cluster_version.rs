//! The Kubernetes version of the cluster, read from `/version` at startup and again after the
//! cluster was unreachable, so that the local validator applies that version's rules (see
//! `poddebug_types::validation::apply_version_rules` and the table in docs/api-reference.md).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use kube::Client;
use poddebug_types::validation::KubeVersion;

/// Between two reads of `/version` once it answered: an upgrade of the cluster is also seen.
const REFRESH: Duration = Duration::from_secs(60);
/// First pause after a failed read; doubled up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(200);
/// Longest pause between reads while the cluster does not answer.
const MAX_RETRY: Duration = Duration::from_secs(10);

/// The last version the cluster reported; shared by the create path and the task that keeps it
/// up to date. Until the first answer, [`KubeVersion::NEWEST_KNOWN`]'s rules apply.
#[derive(Clone, Debug, Default)]
pub struct ClusterVersion(Arc<RwLock<Option<KubeVersion>>>);

impl ClusterVersion {
    /// The version whose rules apply now.
    pub fn rules(&self) -> KubeVersion {
        self.get().unwrap_or(KubeVersion::NEWEST_KNOWN)
    }

    /// The version reported last, if any.
    pub fn get(&self) -> Option<KubeVersion> {
        self.0.read().ok().and_then(|v| *v)
    }

    fn set(&self, v: KubeVersion) {
        if let Ok(mut slot) = self.0.write() {
            *slot = Some(v);
        }
    }

    /// Read `/version` once; the version is kept when it can be parsed.
    pub async fn discover(&self, client: &Client) -> Result<KubeVersion, kube::Error> {
        let info = client.apiserver_version().await?;
        let parsed = KubeVersion::from_version_info(&info.major, &info.minor, &info.git_version);
        match parsed {
            Some(v) => {
                if self.get() != Some(v) {
                    tracing::info!(version = %v, git_version = %info.git_version, "cluster version discovered");
                }
                self.set(v);
                Ok(v)
            }
            None => {
                tracing::warn!(git_version = %info.git_version, major = %info.major, minor = %info.minor,
                    "cluster version cannot be read; the newest known rules apply");
                Ok(self.rules())
            }
        }
    }

    /// Keep the version up to date for the life of the process: read it now, retry with
    /// growing pauses while the cluster does not answer (the first answer after an outage is a
    /// reconnect and is read again), then re-read it every minute.
    pub async fn track(self, client: Client) {
        let mut retry = FIRST_RETRY;
        loop {
            match self.discover(&client).await {
                Ok(_) => {
                    retry = FIRST_RETRY;
                    tokio::time::sleep(REFRESH).await;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "cluster version not readable yet");
                    tokio::time::sleep(retry).await;
                    retry = (retry * 2).min(MAX_RETRY);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_rules_until_the_cluster_answers() {
        let v = ClusterVersion::default();
        assert_eq!(v.get(), None);
        assert_eq!(v.rules(), KubeVersion::NEWEST_KNOWN);
        v.set(KubeVersion::new(1, 31));
        assert_eq!(v.clone().rules(), KubeVersion::new(1, 31));
    }
}
