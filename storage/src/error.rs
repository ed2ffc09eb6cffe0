//! Errors of the storage layer.

use poddebug_types::ApiError;

/// Everything a storage call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A failure the client caused or must see as is (404, 409, 422, a kube-apiserver Status…).
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The Kubernetes API could not be reached or answered garbage.
    #[error("kubernetes API call failed")]
    Kube(#[source] kube::Error),
    /// An expiry stop found, on the pod it read, that the container it was to stop is not
    /// running or not past its deadline (it ended, or it is another container): nothing done.
    #[error("the debug container is no longer due to expire")]
    NotDue,
}

impl From<kube::Error> for StorageError {
    fn from(e: kube::Error) -> Self {
        StorageError::Kube(e)
    }
}

impl StorageError {
    /// The error as the client must see it: kube-apiserver Status errors keep their reason and
    /// message; transport failures become a 503 that names no internals.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            StorageError::Api(e) => e.clone(),
            StorageError::Kube(kube::Error::Api(status)) => {
                ApiError::from_upstream(status_from_kube(status))
            }
            StorageError::Kube(_) => {
                ApiError::ServiceUnavailable("the Kubernetes API is unreachable".to_owned())
            }
            StorageError::NotDue => {
                ApiError::conflict("pods", poddebug_types::GROUP, "", self.to_string())
            }
        }
    }
}

pub(crate) fn status_from_kube(
    s: &kube::core::Status,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Status {
    // kube-core's Status and k8s-openapi's share the wire form, so a JSON round trip keeps every
    // field (details and causes included).
    serde_json::to_value(s)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_else(|| k8s_openapi::apimachinery::pkg::apis::meta::v1::Status {
            code: Some(i32::from(s.code)),
            message: Some(s.message.clone()),
            reason: Some(s.reason.clone()),
            status: Some("Failure".to_owned()),
            ..Default::default()
        })
}
