//! A Secret the server makes once for all its replicas (the record key, the recording signing
//! keys, the serving CA): read as it is; when there is none, made and created; when another
//! replica creates it first (409 AlreadyExists), the winner's is read, so every replica ends
//! up with the same one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};

/// The Secret `name` of `secrets` as it is or, when there is none, the one `make` gives,
/// created (or the one another replica created first). `true` when this call created it.
/// `cluster` turns a failure of kube-apiserver into the caller's error.
pub async fn get_or_create<E>(
    secrets: &Api<Secret>,
    name: &str,
    make: impl FnOnce() -> Result<Secret, E>,
    cluster: impl Fn(kube::Error) -> E,
) -> Result<(Secret, bool), E> {
    if let Some(s) = secrets.get_opt(name).await.map_err(&cluster)? {
        return Ok((s, false));
    }
    let secret = make()?;
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(s) => Ok((s, true)),
        // Another replica made it first: its Secret is the one.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            Ok((secrets.get(name).await.map_err(&cluster)?, false))
        }
        Err(e) => Err(cluster(e)),
    }
}

/// An `Opaque` Secret `name` in `namespace` holding `data`, labelled as the server's.
pub fn managed(
    name: &str,
    namespace: &str,
    type_: &str,
    data: BTreeMap<String, Vec<u8>>,
) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
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
        type_: Some(type_.to_owned()),
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k, k8s_openapi::ByteString(v)))
                .collect(),
        ),
        ..Default::default()
    }
}
