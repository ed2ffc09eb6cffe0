//! The Secret holding the keys that sign recordings ([`SECRET_NAME`] in the server's
//! namespace): read as it is, made by the first replica that finds none (a replica that loses
//! the race reads the winner's). What the entries mean is `poddebug-recording`'s business; this
//! module only moves them between the cluster and the server.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

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
    let (secret, _) = crate::secret_once::get_or_create(
        &secrets,
        SECRET_NAME,
        || {
            let data = make().map_err(|e| {
                StorageError::Api(poddebug_types::ApiError::Internal(format!(
                    "no recording signing key could be made: {e}"
                )))
            })?;
            Ok(crate::secret_once::managed(
                SECRET_NAME,
                namespace,
                "Opaque",
                data,
            ))
        },
        StorageError::from,
    )
    .await?;
    Ok(entries(&secret))
}

fn entries(s: &Secret) -> BTreeMap<String, Vec<u8>> {
    s.data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}
