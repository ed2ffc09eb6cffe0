//! `kube::Resource` for [`PodDebugContainer`], as the `poddebugcontainers` resource lists it.
//!
//! One debug container has two names, because it is reached two ways:
//! - under its pod, `namespaces/NS/pods/POD/debug/NAME`, it is `NAME` (the container's name,
//!   unique within the pod: the "Troubleshoot Running Pods" design's subresource);
//! - in the namespace-wide (or cluster-wide) collection `namespaces/NS/poddebugcontainers`,
//!   where many pods' containers meet, it is `POD.NAME` (a pod name has no `.` ambiguity here:
//!   the last `.` splits, since a container name is a DNS label without dots).
//!
//! kube-rs's `Api<K>`, `watcher`, `reflector` and `await_condition` address a resource by its
//! collection, so this impl is the collection's: `Api::<PodDebugContainer>::namespaced(c, ns)`
//! reads `poddebugcontainers`, and its objects (and the names `get` takes) are `POD.NAME`.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::{NamespaceResourceScope, Resource};

use crate::api::{KIND_POD_DEBUG_CONTAINER, PodDebugContainer};
use crate::{API_VERSION, GROUP, VERSION};

/// The plural of the namespace-wide collection.
pub const PLURAL_POD_DEBUG_CONTAINERS: &str = "poddebugcontainers";

impl Resource for PodDebugContainer {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        Cow::Borrowed(KIND_POD_DEBUG_CONTAINER)
    }

    fn group((): &()) -> Cow<'_, str> {
        Cow::Borrowed(GROUP)
    }

    fn version((): &()) -> Cow<'_, str> {
        Cow::Borrowed(VERSION)
    }

    fn api_version((): &()) -> Cow<'_, str> {
        Cow::Borrowed(API_VERSION)
    }

    fn plural((): &()) -> Cow<'_, str> {
        Cow::Borrowed(PLURAL_POD_DEBUG_CONTAINERS)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The name of debug container `name` of pod `pod` in the `poddebugcontainers` collection.
pub fn collection_name(pod: &str, name: &str) -> String {
    format!("{pod}.{name}")
}

/// `(POD, NAME)` of a `poddebugcontainers` name, `None` when it has no `.`.
pub fn split_collection_name(full: &str) -> Option<(&str, &str)> {
    full.rsplit_once('.')
        .filter(|(p, n)| !p.is_empty() && !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collection_is_poddebugcontainers() {
        assert_eq!(
            PodDebugContainer::url_path(&(), Some("shop")),
            "/apis/poddebug.dev/v1alpha1/namespaces/shop/poddebugcontainers"
        );
        assert_eq!(
            PodDebugContainer::url_path(&(), None),
            "/apis/poddebug.dev/v1alpha1/poddebugcontainers"
        );
        assert_eq!(PodDebugContainer::api_version(&()), "poddebug.dev/v1alpha1");
    }

    #[test]
    fn names_split_at_the_last_dot() {
        assert_eq!(collection_name("web.v2", "dbg"), "web.v2.dbg");
        assert_eq!(split_collection_name("web.v2.dbg"), Some(("web.v2", "dbg")));
        assert_eq!(split_collection_name("web"), None);
        assert_eq!(split_collection_name(".dbg"), None);
    }
}
