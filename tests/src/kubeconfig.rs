//! A kube-rs client from a kubeconfig file, for the bench binaries that run against a cluster.

use std::path::Path;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A client for the current context of the kubeconfig at `path`; the error says what is wrong.
pub async fn client(path: &Path) -> Result<Client, String> {
    let kc =
        Kubeconfig::read_from(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("bad kubeconfig {}: {e}", path.display()))?;
    Client::try_from(cfg).map_err(|e| format!("no client: {e}"))
}
