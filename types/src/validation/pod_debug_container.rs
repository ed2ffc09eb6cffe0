//! Checks of the fields that only exist on `PodDebugContainer`. Errors name our own paths
//! (`metadata.name`, `container.name`, `profile`) and are answered as a 422 for kind
//! `PodDebugContainer`; everything about the container itself is left to
//! [`validate_ephemeral_container_add`](super::validate_ephemeral_container_add), which reports
//! it as kube-apiserver would, on the pod.

use crate::api::PodDebugContainer;
use crate::convert::is_reserved_env;
use crate::field::{ErrorList, FieldError};
use crate::profile::Profile;

/// Validate a `PodDebugContainer` received in a request. `url_name` is the debug name taken
/// from the request path, when the path has one.
///
/// * `metadata.name`, if set, must equal `url_name`, if given (`must match the name in the URL`);
/// * `container.name`, if set, must equal the debug name (`metadata.name`, else `url_name`)
///   when there is one (`must match metadata.name`);
/// * `profile`, if set, must be one of the profile names (`Unsupported value`);
/// * `container.env` may not define `PODDEBUG_NAME`, `PODDEBUG_PROFILE`, `PODDEBUG_OWNER` or
///   `PODDEBUG_EXPIRES_AT`, which poddebug
///   reserves;
/// * `ttlSeconds`, if set, may not be negative (the server's maximum is checked on create);
/// * `reason` and `ticket` are short text without control characters, `debugRequest` a name.
pub fn validate_pod_debug_container(pdc: &PodDebugContainer, url_name: Option<&str>) -> ErrorList {
    let mut errs = ErrorList::new();
    let meta_name = pdc.metadata.name.as_deref().filter(|n| !n.is_empty());
    let url_name = url_name.filter(|n| !n.is_empty());
    if let (Some(meta), Some(url)) = (meta_name, url_name)
        && meta != url
    {
        errs.push(FieldError::invalid(
            "metadata.name",
            meta,
            format!("must match the name in the URL ({url})"),
        ));
    }
    // The debug name itself is not checked here: it becomes the ephemeral container's name,
    // whose rules (a DNS-1123 label) kube-apiserver's validation reports on the pod, with the
    // pod's Status (`spec.ephemeralContainers[N].name`), as it does for `kubectl debug -c`.
    let debug_name = meta_name.or(url_name);
    let container_name = pdc.container.name.as_str();
    if let Some(name) = debug_name
        && !container_name.is_empty()
        && name != container_name
    {
        errs.push(FieldError::invalid(
            "container.name",
            container_name,
            "must match metadata.name",
        ));
    }
    for (i, env) in pdc.container.env.iter().flatten().enumerate() {
        if is_reserved_env(&env.name) {
            let what = match env.name.as_str() {
                crate::convert::DEBUG_NAME_ENV => "the debug container's name",
                crate::convert::PROFILE_ENV => "the debug container's profile",
                crate::convert::OWNER_ENV => "the debug container's owner",
                crate::convert::EXPIRES_AT_ENV => "the debug container's deadline",
                crate::convert::CREATE_ID_ENV => "the identifier of the create",
                _ => "the debug container's reason and debug request",
            };
            errs.push(FieldError::invalid(
                format!("container.env[{i}].name"),
                env.name.as_str(),
                format!("is reserved by poddebug for {what}"),
            ));
        }
    }
    if let Some(ttl) = pdc.ttl_seconds
        && ttl < 0
    {
        errs.push(FieldError::invalid(
            "ttlSeconds",
            ttl,
            "must be greater than or equal to 0",
        ));
    }
    if let Some(profile) = pdc.profile.as_deref().filter(|p| !p.is_empty())
        && Profile::parse(profile).is_none()
    {
        errs.push(FieldError::not_supported(
            "profile",
            profile,
            &Profile::names(),
        ));
    }
    errs.extend(super::validate_justification_fields(
        pdc.reason.as_deref(),
        pdc.ticket.as_deref(),
        pdc.debug_request.as_deref(),
    ));
    errs
}
