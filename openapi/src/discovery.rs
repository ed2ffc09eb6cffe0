//! Legacy discovery: `/apis` as `APIGroupList`, `/apis/poddebug.dev` as `APIGroup` and
//! `/apis/poddebug.dev/v1alpha1` as `APIResourceList`.
//!
//! `/apis/poddebug.dev/v1alpha1` is what the aggregator polls for availability and what it falls
//! back to (through `ConvertGroupVersionIntoToDiscovery`) when `/apis` is not answered in the
//! aggregated form, so it is always served in this form.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, GroupVersionForDiscovery,
};
use poddebug_types::{API_VERSION, GROUP, VERSION};

use crate::resources::{RESOURCES, Resource, Scope};

/// `GET /apis`: an `APIGroupList` holding our one group.
pub fn api_group_list() -> APIGroupList {
    APIGroupList {
        groups: vec![api_group()],
    }
}

/// `GET /apis/poddebug.dev`: the group with its one (preferred) version.
pub fn api_group() -> APIGroup {
    let version = GroupVersionForDiscovery {
        group_version: API_VERSION.to_owned(),
        version: VERSION.to_owned(),
    };
    APIGroup {
        name: GROUP.to_owned(),
        preferred_version: Some(version.clone()),
        server_address_by_client_cidrs: None,
        versions: vec![version],
    }
}

/// `GET /apis/poddebug.dev/v1alpha1`: every entry of [`RESOURCES`].
pub fn api_resource_list() -> APIResourceList {
    APIResourceList {
        group_version: API_VERSION.to_owned(),
        resources: RESOURCES.iter().map(api_resource).collect(),
    }
}

/// One `APIResource`. `group` and `version` are set only for kinds outside our group
/// (`PodAttachOptions` and `Pod` of core `v1`), as kube-apiserver sets them only for a
/// subresource whose kind comes from another group version.
fn api_resource(r: &Resource) -> APIResource {
    let (group, version) = if r.kind.is_poddebug() {
        (None, None)
    } else {
        (
            Some(r.kind.group.to_owned()),
            Some(r.kind.version.to_owned()),
        )
    };
    APIResource {
        name: r.name.to_owned(),
        singular_name: r.singular_name.to_owned(),
        namespaced: r.scope == Scope::Namespaced,
        group,
        version,
        kind: r.kind.kind.to_owned(),
        verbs: r.verbs.iter().map(|v| v.as_str().to_owned()).collect(),
        short_names: non_empty(r.short_names),
        categories: non_empty(r.categories),
        storage_version_hash: None,
    }
}

fn non_empty(items: &[&str]) -> Option<Vec<String>> {
    (!items.is_empty()).then(|| items.iter().map(|s| (*s).to_owned()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn to_json<T: serde::Serialize>(value: &T) -> Value {
        serde_json::to_value(value).expect("serializes")
    }

    #[test]
    fn group_list_and_group() {
        let list = to_json(&api_group_list());
        assert_eq!(list["kind"], "APIGroupList");
        assert_eq!(list["apiVersion"], "v1");
        assert_eq!(list["groups"].as_array().map(Vec::len), Some(1));
        let group = to_json(&api_group());
        assert_eq!(group["kind"], "APIGroup");
        assert_eq!(group["apiVersion"], "v1");
        assert_eq!(group["name"], "poddebug.dev");
        assert_eq!(
            group["versions"],
            json!([{"groupVersion": "poddebug.dev/v1alpha1", "version": "v1alpha1"}])
        );
        assert_eq!(
            group["preferredVersion"],
            json!({"groupVersion": "poddebug.dev/v1alpha1", "version": "v1alpha1"})
        );
    }

    #[test]
    fn resource_list_has_exactly_the_served_resources() {
        let list = to_json(&api_resource_list());
        assert_eq!(list["kind"], "APIResourceList");
        assert_eq!(list["apiVersion"], "v1");
        assert_eq!(list["groupVersion"], "poddebug.dev/v1alpha1");
        assert_eq!(
            list["resources"],
            json!([
                {"name": "debugprofiles", "singularName": "debugprofile", "namespaced": false,
                 "kind": "DebugProfile", "verbs": ["get", "list"]},
                {"name": "debugrecordings", "singularName": "debugrecording", "namespaced": true,
                 "kind": "DebugRecording", "verbs": ["get", "list"], "categories": ["debug"]},
                {"name": "debugrequests", "singularName": "debugrequest", "namespaced": true,
                 "kind": "DebugRequest", "verbs": ["create", "delete", "deletecollection", "get", "list", "watch"],
                 "categories": ["debug"]},
                {"name": "debugrequests/approval", "singularName": "", "namespaced": true,
                 "kind": "DebugRequest", "verbs": ["create"]},
                {"name": "debugsessions", "singularName": "debugsession", "namespaced": true,
                 "kind": "DebugSession", "verbs": ["get", "list", "watch"],
                 "categories": ["debug"]},
                {"name": "nodedebugcontainers", "singularName": "nodedebugcontainer",
                 "namespaced": false, "kind": "NodeDebugContainer",
                 "verbs": ["get", "list", "watch"], "categories": ["debug"]},
                {"name": "nodes/debug", "singularName": "", "namespaced": false,
                 "kind": "NodeDebugContainer", "verbs": ["create", "delete", "get", "list"]},
                {"name": "nodes/log", "singularName": "", "namespaced": false, "group": "",
                 "version": "v1", "kind": "Node", "verbs": ["get"]},
                {"name": "poddebugcontainers", "singularName": "poddebugcontainer",
                 "namespaced": true, "kind": "PodDebugContainer",
                 "verbs": ["get", "list", "watch"], "shortNames": ["pdc"],
                 "categories": ["debug"]},
                {"name": "poddebugcopies", "singularName": "poddebugcopy",
                 "namespaced": true, "kind": "PodDebugCopy",
                 "verbs": ["get", "list", "watch"], "categories": ["debug"]},
                {"name": "pods/attach", "singularName": "", "namespaced": true, "group": "",
                 "version": "v1", "kind": "PodAttachOptions", "verbs": ["create", "get"]},
                {"name": "pods/copies", "singularName": "", "namespaced": true,
                 "kind": "PodDebugCopy", "verbs": ["delete", "get", "list"]},
                {"name": "pods/copy", "singularName": "", "namespaced": true,
                 "kind": "PodDebugCopy", "verbs": ["create"]},
                {"name": "pods/debug", "singularName": "", "namespaced": true,
                 "kind": "PodDebugContainer", "verbs": ["create", "delete", "get", "list"]},
                {"name": "pods/log", "singularName": "", "namespaced": true, "group": "",
                 "version": "v1", "kind": "Pod", "verbs": ["get"]},
                {"name": "pods/recordings", "singularName": "", "namespaced": true,
                 "kind": "DebugRecordingList", "verbs": ["get"]},
                {"name": "pods/sessions", "singularName": "", "namespaced": true,
                 "kind": "DebugSession", "verbs": ["delete", "get", "list"]},
                {"name": "recordingkeys", "singularName": "recordingkey", "namespaced": false,
                 "kind": "RecordingKey", "verbs": ["get", "list"]},
            ])
        );
        let names: Vec<_> = list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["name"].as_str().unwrap_or_default())
            .collect();
        assert!(!names.contains(&"pods"), "pods itself is not served");
    }
}
