//! Attach and log streams of debug containers, proxied to the pod's core `pods/attach` and
//! `pods/log` endpoints.

use std::collections::BTreeMap;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use poddebug_types::ApiError;

use crate::authn::Authenticated;
use crate::error::Error;
use crate::state::AppState;

/// How to reach the kube-apiserver for streams.
pub struct Upstream {
    #[allow(dead_code)]
    config: kube::Config,
    #[allow(dead_code)]
    impersonate: bool,
}

impl Upstream {
    /// From the server's cluster configuration.
    pub fn new(config: kube::Config, impersonate: bool) -> Result<Self, String> {
        Ok(Upstream {
            config,
            impersonate,
        })
    }
}

/// `GET|POST .../pods/POD/attach?container=NAME`.
pub async fn attach(
    State(_st): State<AppState>,
    Path((_ns, _pod)): Path<(String, String)>,
    Query(_q): Query<BTreeMap<String, String>>,
    Extension(_auth): Extension<Authenticated>,
) -> Result<Response, Error> {
    Err(
        ApiError::ServiceUnavailable("attach streams are not available in this build".to_owned())
            .into(),
    )
}

/// `GET .../pods/POD/log?container=NAME`.
pub async fn log(
    State(_st): State<AppState>,
    Path((_ns, _pod)): Path<(String, String)>,
    Query(_q): Query<BTreeMap<String, String>>,
    Extension(_auth): Extension<Authenticated>,
) -> Result<Response, Error> {
    Err(
        ApiError::ServiceUnavailable("log streams are not available in this build".to_owned())
            .into(),
    )
}
