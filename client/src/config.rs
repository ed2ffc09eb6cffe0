//! Making a `kube::Client` the way kubectl picks its configuration.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Where the configuration comes from, as kubectl's `--kubeconfig` and `--context` say.
///
/// With neither set, the configuration is inferred as kube-rs does: `KUBECONFIG` or
/// `~/.kube/config`, else the in-cluster service account. Every auth kind kube-rs supports
/// works (client certificates, tokens, token files, exec plugins, OIDC, in-cluster).
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    /// A kubeconfig file to use instead of `KUBECONFIG` / `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use instead of the current one.
    pub context: Option<String>,
}

/// A client and the namespace the configuration names (the context's, `default` without one).
pub async fn connect(options: &ConnectOptions) -> Result<(kube::Client, String)> {
    let config = config(options).await?;
    let namespace = config.default_namespace.clone();
    let client = kube::Client::try_from(config).map_err(Error::Kube)?;
    Ok((client, namespace))
}

/// The `kube::Config` for `options`.
pub async fn config(options: &ConnectOptions) -> Result<kube::Config> {
    let kc_options = kube::config::KubeConfigOptions {
        context: options.context.clone(),
        ..Default::default()
    };
    match (&options.kubeconfig, &options.context) {
        (Some(path), _) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(Error::Kubeconfig)?;
            kube::Config::from_custom_kubeconfig(kc, &kc_options)
                .await
                .map_err(Error::Kubeconfig)
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&kc_options)
            .await
            .map_err(Error::Kubeconfig),
        (None, None) => kube::Config::infer().await.map_err(Error::InferConfig),
    }
}
