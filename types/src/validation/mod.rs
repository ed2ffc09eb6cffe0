//! Validation, as kube-apiserver does it.
//!
//! * [`validate_ephemeral_container_add`] answers, for an ephemeral container about to be
//!   appended to a pod, what kube-apiserver's `pods/ephemeralcontainers` update validation would
//!   answer: the same field errors, with the same paths, values, texts and order, with the rules
//!   of the cluster's version ([`validate_ephemeral_container_add_on`]). It is the fast first
//!   pass and the documented rules; the cluster is the authority: a refusal is confirmed with a
//!   server-side dry run, whose 422 is told on the `PodDebugContainer`'s fields by
//!   [`debug_container_invalid`].
//! * [`validate_pod_debug_container`] checks the fields that exist only on our own object
//!   (`profile`, the name in three places).
//! * [`validate_node_debug_container`] checks a node debug container's `container`: an
//!   ephemeral container's fields, and nothing that reaches the server's namespace.
//!
//! The Go functions reproduced are named in each function's documentation; they are those of
//! k/k `pkg/apis/core/validation/validation.go` as of kube-apiserver 1.36.

mod cluster_answer;
mod cluster_version;
mod debug_request;
mod defaults;
mod env;
mod ephemeral;
mod image_ref;
mod node_debug_container;
mod pod_debug_container;
mod security_context;
mod volumes;

#[cfg(test)]
mod tests;

pub use cluster_answer::{debug_container_field, debug_container_invalid};
pub use cluster_version::{KubeVersion, apply_version_rules};
pub use debug_request::{
    CONTROL_CHARACTERS_DETAIL, validate_comment, validate_debug_request,
    validate_justification_fields, validate_text,
};
pub use defaults::{
    TERMINATION_MESSAGE_PATH_DEFAULT, apply_ephemeral_defaults, default_image_pull_policy,
};
pub use ephemeral::{
    EPHEMERAL_FORBIDDEN_DETAIL, MIRROR_POD_ANNOTATION, STATIC_POD_DETAIL,
    validate_ephemeral_container_add, validate_ephemeral_container_add_on,
};
pub use node_debug_container::{
    NODE_NO_VOLUMES_DETAIL, NODE_SERVER_NAMESPACE_DETAIL, validate_node_debug_container,
};
pub use pod_debug_container::validate_pod_debug_container;
pub use security_context::MAX_USER_ID;

use crate::field::{ErrorList, FieldError};

/// `path.Child(name)` of apimachinery's `field.Path`.
fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// `path.Index(i)`.
fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// `validatePathNoBacksteps`: no `..` element.
fn validate_path_no_backsteps(target: &str, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    if target.split('/').any(|item| item == "..") {
        // One error is enough, even for `../../..`.
        errs.push(FieldError::invalid(path, target, "must not contain '..'"));
    }
    errs
}

/// `validateLocalDescendingPath`: relative, and without `..`.
fn validate_local_descending_path(target: &str, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    if target.starts_with('/') {
        errs.push(FieldError::invalid(path, target, "must be a relative path"));
    }
    errs.extend(validate_path_no_backsteps(target, path));
    errs
}
