//! The Secret holding the keys that sign recordings ([`SECRET_NAME`] in the server's
//! namespace): read as it is, made by the first replica that finds none (a replica that loses
//! the race reads the winner's). What the entries mean is `poddebug-recording`'s business; this
//! module only moves them between the cluster and the server.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};

use crate::StorageError;

/// The Secret holding the recording signing keys, in the server's namespace.
pub const SECRET_NAME: &str = "poddebug-recording-signing-keys";

/// The entries of the Secret [`SECRET_NAME`] in `namespace`; when there is none, it is created
/// with the entries `make` gives.
pub async fn load_or_create(
    client: kube::Client,
    namespace: &str,
    make: impl FnOnce() -> Result<BTreeMap<String, Vec<u8>>, String>,
) -> Result<BTreeMap<String, Vec<u8>>, StorageError> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    if let Some(s) = secrets.get_opt(SECRET_NAME).await? {
        return Ok(entries(&s));
    }
    let data = make().map_err(|e| {
        StorageError::Api(poddebug_types::ApiError::Internal(format!(
            "no recording signing key could be made: {e}"
        )))
    })?;
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(SECRET_NAME.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(
                [(
                    "app.kubernetes.io/managed-by".to_owned(),
                    "poddebug-apiserver".to_owned(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k, k8s_openapi::ByteString(v)))
                .collect(),
        ),
        ..Default::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(s) => Ok(entries(&s)),
        // Another replica made it first: use its keys.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(entries(&secrets.get(SECRET_NAME).await?)),
        Err(e) => Err(e.into()),
    }
}

fn entries(s: &Secret) -> BTreeMap<String, Vec<u8>> {
    s.data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}
