//! Aggregated discovery (`apidiscovery.k8s.io/v2` and `v2beta1`): `/apis` as one
//! `APIGroupDiscoveryList`.
//!
//! The resources nest their subresources. A subresource whose parent is not served (`pods/debug`,
//! `pods/attach`, `pods/log`) hangs under a made-up parent entry `pods` with the subresource's
//! scope, empty verbs, an empty `singularResource` and an empty `responseKind`, exactly as
//! kube-apiserver's `endpoints.ConvertGroupVersionIntoToDiscovery` builds it when the aggregator
//! falls back to legacy discovery, so both paths give clients the same picture.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use poddebug_types::{GROUP, VERSION};
use serde::{Deserialize, Serialize};

use crate::resources::{Gvk, RESOURCES, Resource, Scope};

/// The group of the aggregated discovery types.
pub const DISCOVERY_GROUP: &str = "apidiscovery.k8s.io";

/// Which version of `apidiscovery.k8s.io` to answer with. Both have the same schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregatedVersion {
    /// `apidiscovery.k8s.io/v2` (Kubernetes ≥ 1.30).
    V2,
    /// `apidiscovery.k8s.io/v2beta1` (Kubernetes 1.26 – 1.32).
    V2Beta1,
}

impl AggregatedVersion {
    /// `v2` or `v2beta1`.
    pub fn as_str(self) -> &'static str {
        match self {
            AggregatedVersion::V2 => "v2",
            AggregatedVersion::V2Beta1 => "v2beta1",
        }
    }

    /// `apidiscovery.k8s.io/v2` or `apidiscovery.k8s.io/v2beta1`.
    pub fn api_version(self) -> String {
        format!("{DISCOVERY_GROUP}/{}", self.as_str())
    }
}

/// `apidiscovery.k8s.io` `APIGroupDiscoveryList`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIGroupDiscoveryList {
    /// `apidiscovery.k8s.io/v2` or `apidiscovery.k8s.io/v2beta1`.
    pub api_version: String,
    /// `APIGroupDiscoveryList`.
    pub kind: String,
    /// Empty list metadata.
    pub metadata: ListMeta,
    /// One entry per group, in priority order.
    pub items: Vec<APIGroupDiscovery>,
}

/// One group of an `APIGroupDiscoveryList`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIGroupDiscovery {
    /// Only `name` is set: the group's name.
    pub metadata: ObjectMeta,
    /// Versions, preferred first.
    pub versions: Vec<APIVersionDiscovery>,
}

/// One version of a group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIVersionDiscovery {
    /// The version.
    pub version: String,
    /// Its resources.
    pub resources: Vec<APIResourceDiscovery>,
    /// `Current`: we answer for ourselves, so the document is never stale.
    pub freshness: String,
}

/// One resource, with its subresources nested.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIResourceDiscovery {
    /// Plural name.
    pub resource: String,
    /// Kind returned; all fields empty for a made-up parent.
    pub response_kind: GroupVersionKind,
    /// `Namespaced` or `Cluster`.
    pub scope: String,
    /// Singular name; empty for a made-up parent.
    pub singular_resource: String,
    /// Verbs; empty for a made-up parent.
    pub verbs: Vec<String>,
    /// Short names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
    /// Categories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Subresources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subresources: Vec<APISubresourceDiscovery>,
}

/// One subresource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APISubresourceDiscovery {
    /// Subresource name (`debug`).
    pub subresource: String,
    /// Kind returned.
    pub response_kind: GroupVersionKind,
    /// Verbs.
    pub verbs: Vec<String>,
}

/// `metav1.GroupVersionKind` as discovery serializes it (all three keys always present).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionKind {
    /// Group, `""` for core (and for a made-up parent).
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl From<Gvk> for GroupVersionKind {
    fn from(gvk: Gvk) -> Self {
        GroupVersionKind {
            group: gvk.group.to_owned(),
            version: gvk.version.to_owned(),
            kind: gvk.kind.to_owned(),
        }
    }
}

/// `GET /apis` in the aggregated form: one group, one version, every entry of [`RESOURCES`].
pub fn aggregated_discovery(version: AggregatedVersion) -> APIGroupDiscoveryList {
    APIGroupDiscoveryList {
        api_version: version.api_version(),
        kind: "APIGroupDiscoveryList".to_owned(),
        metadata: ListMeta::default(),
        items: vec![APIGroupDiscovery {
            metadata: ObjectMeta {
                name: Some(GROUP.to_owned()),
                ..ObjectMeta::default()
            },
            versions: vec![APIVersionDiscovery {
                version: VERSION.to_owned(),
                resources: resources(RESOURCES),
                freshness: "Current".to_owned(),
            }],
        }],
    }
}

/// Resources first, in table order; then each subresource joins its parent, a made-up one if
/// the parent is not served.
fn resources(table: &[Resource]) -> Vec<APIResourceDiscovery> {
    let mut out: Vec<APIResourceDiscovery> = table
        .iter()
        .filter(|r| r.split().is_none())
        .map(|r| APIResourceDiscovery {
            resource: r.name.to_owned(),
            response_kind: r.kind.into(),
            scope: scope(r.scope).to_owned(),
            singular_resource: r.singular_name.to_owned(),
            verbs: verbs(r),
            short_names: r.short_names.iter().map(|s| (*s).to_owned()).collect(),
            categories: r.categories.iter().map(|s| (*s).to_owned()).collect(),
            subresources: Vec::new(),
        })
        .collect();
    for r in table {
        let Some((parent, sub)) = r.split() else {
            continue;
        };
        let index = match out.iter().position(|p| p.resource == parent) {
            Some(index) => index,
            None => {
                out.push(APIResourceDiscovery {
                    resource: parent.to_owned(),
                    response_kind: GroupVersionKind::default(),
                    scope: scope(r.scope).to_owned(),
                    singular_resource: String::new(),
                    verbs: Vec::new(),
                    short_names: Vec::new(),
                    categories: Vec::new(),
                    subresources: Vec::new(),
                });
                out.len() - 1
            }
        };
        out[index].subresources.push(APISubresourceDiscovery {
            subresource: sub.to_owned(),
            response_kind: r.kind.into(),
            verbs: verbs(r),
        });
    }
    out
}

fn scope(scope: Scope) -> &'static str {
    match scope {
        Scope::Namespaced => "Namespaced",
        Scope::Cluster => "Cluster",
    }
}

fn verbs(r: &Resource) -> Vec<String> {
    r.verbs.iter().map(|v| v.as_str().to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn v2_document() {
        let doc =
            serde_json::to_value(aggregated_discovery(AggregatedVersion::V2)).expect("serializes");
        assert_eq!(
            doc,
            json!({
                "apiVersion": "apidiscovery.k8s.io/v2",
                "kind": "APIGroupDiscoveryList",
                "metadata": {},
                "items": [{
                    "metadata": {"name": "poddebug.dev"},
                    "versions": [{
                        "version": "v1alpha1",
                        "freshness": "Current",
                        "resources": [
                            {"resource": "debugprofiles",
                             "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "DebugProfile"},
                             "scope": "Cluster", "singularResource": "debugprofile",
                             "verbs": ["get", "list"]},
                            {"resource": "debugrecordings",
                             "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "DebugRecording"},
                             "scope": "Namespaced", "singularResource": "debugrecording",
                             "verbs": ["get", "list"], "categories": ["debug"]},
                            {"resource": "debugrequests",
                             "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "DebugRequest"},
                             "scope": "Namespaced", "singularResource": "debugrequest",
                             "verbs": ["create", "delete", "deletecollection", "get", "list", "watch"], "categories": ["debug"],
                             "subresources": [
                                {"subresource": "approval",
                                 "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "DebugRequest"},
                                 "verbs": ["create"]}]},
                            {"resource": "debugsessions",
                             "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "DebugSession"},
                             "scope": "Namespaced", "singularResource": "debugsession",
                             "verbs": ["get", "list", "watch"], "categories": ["debug"]},
                            {"resource": "nodedebugcontainers",
                             "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "NodeDebugContainer"},
                             "scope": "Cluster", "singularResource": "nodedebugcontainer",
                             "verbs": ["get", "list", "watch"], "categories": ["debug"]},
                            {"resource": "poddebugcontainers",
                             "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "PodDebugContainer"},
                             "scope": "Namespaced", "singularResource": "poddebugcontainer",
                             "verbs": ["get", "list", "watch"], "shortNames": ["pdc"],
                             "categories": ["debug"]},
                            {"resource": "poddebugcopies",
                             "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "PodDebugCopy"},
                             "scope": "Namespaced", "singularResource": "poddebugcopy",
                             "verbs": ["get", "list", "watch"], "categories": ["debug"]},
                            {"resource": "recordingkeys",
                             "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "RecordingKey"},
                             "scope": "Cluster", "singularResource": "recordingkey",
                             "verbs": ["get", "list"]},
                            {"resource": "nodes",
                             "responseKind": {"group": "", "version": "", "kind": ""},
                             "scope": "Cluster", "singularResource": "", "verbs": [],
                             "subresources": [
                                {"subresource": "debug",
                                 "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "NodeDebugContainer"},
                                 "verbs": ["create", "delete", "get", "list"]},
                                {"subresource": "log",
                                 "responseKind": {"group": "", "version": "v1", "kind": "Node"},
                                 "verbs": ["get"]},
                             ]},
                            {"resource": "pods",
                             "responseKind": {"group": "", "version": "", "kind": ""},
                             "scope": "Namespaced", "singularResource": "", "verbs": [],
                             "subresources": [
                                {"subresource": "attach",
                                 "responseKind": {"group": "", "version": "v1", "kind": "PodAttachOptions"},
                                 "verbs": ["create", "get"]},
                                {"subresource": "copies",
                                 "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "PodDebugCopy"},
                                 "verbs": ["delete", "get", "list"]},
                                {"subresource": "copy",
                                 "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "PodDebugCopy"},
                                 "verbs": ["create"]},
                                {"subresource": "debug",
                                 "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "PodDebugContainer"},
                                 "verbs": ["create", "delete", "get", "list"]},
                                {"subresource": "log",
                                 "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                                 "verbs": ["get"]},
                                {"subresource": "recordings",
                                 "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "DebugRecordingList"},
                                 "verbs": ["get"]},
                                {"subresource": "sessions",
                                 "responseKind": {"group": "poddebug.dev", "version": "v1alpha1", "kind": "DebugSession"},
                                 "verbs": ["delete", "get", "list"]},
                             ]},
                        ],
                    }],
                }],
            })
        );
    }

    #[test]
    fn v2beta1_differs_only_in_api_version() {
        let mut v2 = aggregated_discovery(AggregatedVersion::V2);
        let beta = aggregated_discovery(AggregatedVersion::V2Beta1);
        assert_eq!(beta.api_version, "apidiscovery.k8s.io/v2beta1");
        v2.api_version = beta.api_version.clone();
        assert_eq!(v2, beta);
    }

    #[test]
    fn a_served_parent_carries_its_subresources() {
        let table = [
            Resource {
                name: "widgets",
                singular_name: "widget",
                parent_kind: "",
                scope: Scope::Namespaced,
                kind: Gvk::poddebug("Widget"),
                list_kind: Some("WidgetList"),
                verbs: &[crate::resources::Verb::Get],
                short_names: &[],
                categories: &[],
                shape: crate::resources::Shape::Objects,
            },
            Resource {
                name: "widgets/status",
                singular_name: "",
                parent_kind: "Widget",
                scope: Scope::Namespaced,
                kind: Gvk::poddebug("Widget"),
                list_kind: None,
                verbs: &[crate::resources::Verb::Get],
                short_names: &[],
                categories: &[],
                shape: crate::resources::Shape::Objects,
            },
        ];
        let out = resources(&table);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].verbs, ["get"]);
        assert_eq!(out[0].subresources.len(), 1);
        assert_eq!(out[0].subresources[0].subresource, "status");
    }
}
