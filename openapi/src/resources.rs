//! The single table of what `poddebug.dev/v1alpha1` serves.
//!
//! Legacy discovery, aggregated discovery and both OpenAPI documents are generated from
//! [`RESOURCES`]; nothing else in this crate names a resource, a verb or a path.

use poddebug_types::{GROUP, VERSION};

use crate::params::{ATTACH_OPTIONS, LOG_OPTIONS, Param};

/// Group, version and kind of an object, as `x-kubernetes-group-version-kind` and discovery's
/// `responseKind` spell them. `group` is `""` for the core group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Gvk {
    /// API group, `""` for core.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
}

impl Gvk {
    /// A kind of `poddebug.dev/v1alpha1`.
    pub const fn poddebug(kind: &'static str) -> Gvk {
        Gvk {
            group: GROUP,
            version: VERSION,
            kind,
        }
    }

    /// A kind of the core group `v1`.
    pub const fn core(kind: &'static str) -> Gvk {
        Gvk {
            group: "",
            version: "v1",
            kind,
        }
    }

    /// Whether the kind belongs to `poddebug.dev/v1alpha1`.
    pub fn is_poddebug(&self) -> bool {
        self.group == GROUP && self.version == VERSION
    }
}

/// Whether a resource lives in a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Addressed under `namespaces/{namespace}/`.
    Namespaced,
    /// Addressed without a namespace.
    Cluster,
}

/// A Kubernetes verb, as discovery lists it and RBAC checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verb {
    /// `POST`.
    Create,
    /// `DELETE` of one object.
    Delete,
    /// `DELETE` of a collection.
    DeleteCollection,
    /// `GET` of one object (or of a connect/text subresource).
    Get,
    /// `GET` of a collection.
    List,
    /// `GET` of a collection with `?watch=true`.
    Watch,
}

impl Verb {
    /// The verb as discovery and RBAC spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
        }
    }
}

/// How a resource's endpoints look, which decides the OpenAPI paths generated for it.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// A standard resource: `…/{resource}` lists (and watches, and creates),
    /// `…/{resource}/{name}` gets (and deletes).
    Objects,
    /// A subresource holding a collection of objects: `…/{parent}/{name}/{sub}` lists and creates,
    /// `…/{parent}/{name}/{sub}/{item}` gets, creates and deletes one of them.
    NestedCollection {
        /// Name of the path parameter that names one object of the collection.
        item: &'static str,
        /// Its description.
        item_description: &'static str,
    },
    /// A streaming subresource (WebSocket `GET`, SPDY `POST`) taking its options as query
    /// parameters; `x-kubernetes-action: connect`.
    Connect {
        /// The query parameters.
        options: &'static [Param],
    },
    /// A subresource holding files: `…/{parent}/{name}/{sub}` lists them (JSON, the resource's
    /// kind), `…/{parent}/{name}/{sub}/{item}` returns one in `media_types`. Both are `get`.
    Files {
        /// Name of the path parameter that names one file.
        item: &'static str,
        /// Its description.
        item_description: &'static str,
        /// Media types of one file.
        media_types: &'static [&'static str],
        /// What is derived from one file, as JSON: `…/{item}/{name}` answers `kind`.
        derived: &'static [(&'static str, &'static str)],
        /// Query parameters of reading one file.
        options: &'static [Param],
    },
    /// A subresource that only creates: `POST …/{parent}/{name}/{sub}` answers the object made
    /// (`pods/copy`).
    Create,
    /// A subresource that acts on its parent: `POST …/{parent}/{name}/{sub}` with a body of
    /// kind `body` answers the parent as changed (`debugrequests/approval`).
    Action {
        /// Kind of the body.
        body: Gvk,
    },
    /// A subresource answering `GET` with plain text.
    Text {
        /// The query parameters.
        options: &'static [Param],
    },
}

/// One entry of the legacy discovery document, plus what the OpenAPI paths need.
#[derive(Clone, Copy, Debug)]
pub struct Resource {
    /// Plural name, or `parent/subresource`.
    pub name: &'static str,
    /// Singular name; empty for subresources, as kube-apiserver lists them.
    pub singular_name: &'static str,
    /// Kind of the parent of a subresource (`Pod` for `pods/debug`); empty for a resource.
    pub parent_kind: &'static str,
    /// Namespaced or cluster-scoped (a subresource shares its parent's scope).
    pub scope: Scope,
    /// Kind of the object the endpoints return.
    pub kind: Gvk,
    /// Kind of the list returned by `list`, when the resource can be listed.
    pub list_kind: Option<&'static str>,
    /// Verbs, sorted as kube-apiserver sorts them.
    pub verbs: &'static [Verb],
    /// Short names for kubectl.
    pub short_names: &'static [&'static str],
    /// Categories for `kubectl get <category>`.
    pub categories: &'static [&'static str],
    /// What the endpoints look like.
    pub shape: Shape,
}

impl Resource {
    /// Whether the resource supports `verb`.
    pub fn supports(&self, verb: Verb) -> bool {
        self.verbs.contains(&verb)
    }

    /// `(parent, subresource)` for a subresource, `None` for a resource.
    pub fn split(&self) -> Option<(&'static str, &'static str)> {
        self.name.split_once('/')
    }

    /// Whether the resource is namespaced.
    pub fn namespaced(&self) -> bool {
        self.scope == Scope::Namespaced
    }
}

/// Every resource and subresource of `poddebug.dev/v1alpha1`, sorted by name as kube-apiserver
/// lists them.
///
/// `pods` itself is deliberately absent: listing it would claim that this server serves pods.
/// The aggregator (and our own aggregated discovery) adds an empty parent `pods` entry to carry
/// the subresources.
pub const RESOURCES: &[Resource] = &[
    Resource {
        name: "debugprofiles",
        singular_name: "debugprofile",
        parent_kind: "",
        scope: Scope::Cluster,
        kind: Gvk::poddebug("DebugProfile"),
        list_kind: Some("DebugProfileList"),
        verbs: &[Verb::Get, Verb::List],
        short_names: &[],
        categories: &[],
        shape: Shape::Objects,
    },
    Resource {
        name: "debugrecordings",
        singular_name: "debugrecording",
        parent_kind: "",
        scope: Scope::Namespaced,
        kind: Gvk::poddebug("DebugRecording"),
        list_kind: Some("DebugRecordingList"),
        verbs: &[Verb::Get, Verb::List],
        short_names: &[],
        categories: &["debug"],
        shape: Shape::Objects,
    },
    Resource {
        name: "debugrequests",
        singular_name: "debugrequest",
        parent_kind: "",
        scope: Scope::Namespaced,
        kind: Gvk::poddebug("DebugRequest"),
        list_kind: Some("DebugRequestList"),
        verbs: &[
            Verb::Create,
            Verb::Delete,
            Verb::DeleteCollection,
            Verb::Get,
            Verb::List,
            Verb::Watch,
        ],
        short_names: &[],
        categories: &["debug"],
        shape: Shape::Objects,
    },
    Resource {
        name: "debugrequests/approval",
        singular_name: "",
        parent_kind: "DebugRequest",
        scope: Scope::Namespaced,
        kind: Gvk::poddebug("DebugRequest"),
        list_kind: None,
        verbs: &[Verb::Create],
        short_names: &[],
        categories: &[],
        shape: Shape::Action {
            body: Gvk::poddebug("DebugRequestApproval"),
        },
    },
    Resource {
        name: "debugsessions",
        singular_name: "debugsession",
        parent_kind: "",
        scope: Scope::Namespaced,
        kind: Gvk::poddebug("DebugSession"),
        list_kind: Some("DebugSessionList"),
        verbs: &[Verb::Get, Verb::List, Verb::Watch],
        short_names: &[],
        categories: &["debug"],
        shape: Shape::Objects,
    },
    Resource {
        name: "nodedebugcontainers",
        singular_name: "nodedebugcontainer",
        parent_kind: "",
        scope: Scope::Cluster,
        kind: Gvk::poddebug("NodeDebugContainer"),
        list_kind: Some("NodeDebugContainerList"),
        verbs: &[Verb::Get, Verb::List, Verb::Watch],
        short_names: &[],
        categories: &["debug"],
        shape: Shape::Objects,
    },
    Resource {
        name: "nodes/debug",
        singular_name: "",
        parent_kind: "Node",
        scope: Scope::Cluster,
        kind: Gvk::poddebug("NodeDebugContainer"),
        list_kind: Some("NodeDebugContainerList"),
        verbs: &[Verb::Create, Verb::Delete, Verb::Get, Verb::List],
        short_names: &[],
        categories: &[],
        shape: Shape::NestedCollection {
            item: "container",
            item_description: "name of the node debug container",
        },
    },
    Resource {
        name: "nodes/log",
        singular_name: "",
        parent_kind: "Node",
        scope: Scope::Cluster,
        kind: Gvk::core("Node"),
        list_kind: None,
        verbs: &[Verb::Get],
        short_names: &[],
        categories: &[],
        shape: Shape::Text {
            options: LOG_OPTIONS,
        },
    },
    Resource {
        name: "poddebugcontainers",
        singular_name: "poddebugcontainer",
        parent_kind: "",
        scope: Scope::Namespaced,
        kind: Gvk::poddebug("PodDebugContainer"),
        list_kind: Some("PodDebugContainerList"),
        verbs: &[Verb::Get, Verb::List, Verb::Watch],
        short_names: &["pdc"],
        categories: &["debug"],
        shape: Shape::Objects,
    },
    Resource {
        name: "poddebugcopies",
        singular_name: "poddebugcopy",
        parent_kind: "",
        scope: Scope::Namespaced,
        kind: Gvk::poddebug("PodDebugCopy"),
        list_kind: Some("PodDebugCopyList"),
        verbs: &[Verb::Get, Verb::List, Verb::Watch],
        short_names: &[],
        categories: &["debug"],
        shape: Shape::Objects,
    },
    Resource {
        name: "pods/attach",
        singular_name: "",
        parent_kind: "Pod",
        scope: Scope::Namespaced,
        kind: Gvk::core("PodAttachOptions"),
        list_kind: None,
        verbs: &[Verb::Create, Verb::Get],
        short_names: &[],
        categories: &[],
        shape: Shape::Connect {
            options: ATTACH_OPTIONS,
        },
    },
    Resource {
        name: "pods/copies",
        singular_name: "",
        parent_kind: "Pod",
        scope: Scope::Namespaced,
        kind: Gvk::poddebug("PodDebugCopy"),
        list_kind: Some("PodDebugCopyList"),
        verbs: &[Verb::Delete, Verb::Get, Verb::List],
        short_names: &[],
        categories: &[],
        shape: Shape::NestedCollection {
            item: "copy",
            item_description: "name of the copy",
        },
    },
    Resource {
        name: "pods/copy",
        singular_name: "",
        parent_kind: "Pod",
        scope: Scope::Namespaced,
        kind: Gvk::poddebug("PodDebugCopy"),
        list_kind: None,
        verbs: &[Verb::Create],
        short_names: &[],
        categories: &[],
        shape: Shape::Create,
    },
    Resource {
        name: "pods/debug",
        singular_name: "",
        parent_kind: "Pod",
        scope: Scope::Namespaced,
        kind: Gvk::poddebug("PodDebugContainer"),
        list_kind: Some("PodDebugContainerList"),
        verbs: &[Verb::Create, Verb::Delete, Verb::Get, Verb::List],
        short_names: &[],
        categories: &[],
        shape: Shape::NestedCollection {
            item: "container",
            item_description: "name of the debug container",
        },
    },
    Resource {
        name: "pods/log",
        singular_name: "",
        parent_kind: "Pod",
        scope: Scope::Namespaced,
        kind: Gvk::core("Pod"),
        list_kind: None,
        verbs: &[Verb::Get],
        short_names: &[],
        categories: &[],
        shape: Shape::Text {
            options: LOG_OPTIONS,
        },
    },
    Resource {
        name: "pods/recordings",
        singular_name: "",
        parent_kind: "Pod",
        scope: Scope::Namespaced,
        kind: Gvk::poddebug("DebugRecordingList"),
        list_kind: None,
        verbs: &[Verb::Get],
        short_names: &[],
        categories: &[],
        shape: Shape::Files {
            item: "id",
            item_description: "id of the recording",
            media_types: &["application/x-asciicast"],
            derived: &[
                ("commands", "DebugRecordingCommandList"),
                ("evidence", "DebugRecordingEvidence"),
            ],
            options: crate::params::RECORDING_RANGE,
        },
    },
    Resource {
        name: "pods/sessions",
        singular_name: "",
        parent_kind: "Pod",
        scope: Scope::Namespaced,
        kind: Gvk::poddebug("DebugSession"),
        list_kind: Some("DebugSessionList"),
        verbs: &[Verb::Delete, Verb::Get, Verb::List],
        short_names: &[],
        categories: &[],
        shape: Shape::NestedCollection {
            item: "session",
            item_description: "id of the session",
        },
    },
    Resource {
        name: "recordingkeys",
        singular_name: "recordingkey",
        parent_kind: "",
        scope: Scope::Cluster,
        kind: Gvk::poddebug("RecordingKey"),
        list_kind: Some("RecordingKeyList"),
        verbs: &[Verb::Get, Verb::List],
        short_names: &[],
        categories: &[],
        shape: Shape::Objects,
    },
];

/// `/apis/poddebug.dev/v1alpha1`, the prefix of every path.
pub fn group_version_path() -> String {
    format!("/apis/{GROUP}/{VERSION}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_consistent() {
        let names: Vec<_> = RESOURCES.iter().map(|r| r.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(
            names, sorted,
            "kube-apiserver lists resources sorted by name"
        );
        for r in RESOURCES {
            let mut verbs = r.verbs.to_vec();
            verbs.sort();
            verbs.dedup();
            assert_eq!(verbs, r.verbs, "{}: verbs sorted and unique", r.name);
            match r.split() {
                Some((parent, _)) => {
                    assert!(r.singular_name.is_empty(), "{}", r.name);
                    assert!(!r.parent_kind.is_empty(), "{}", r.name);
                    // A subresource of another group's kind (pods, nodes) does not list its
                    // parent; one of our own kinds does.
                    let listed = RESOURCES.iter().find(|p| p.name == parent);
                    assert_eq!(
                        listed.map(|p| p.kind.kind),
                        RESOURCES
                            .iter()
                            .any(|p| p.kind.kind == r.parent_kind && p.name == parent)
                            .then_some(r.parent_kind),
                        "{}: the parent is listed when it is ours",
                        r.name
                    );
                    assert!(r.short_names.is_empty() && r.categories.is_empty());
                }
                None => {
                    assert!(!r.singular_name.is_empty(), "{}", r.name);
                    assert!(matches!(r.shape, Shape::Objects), "{}", r.name);
                }
            }
            if r.supports(Verb::List) {
                assert!(r.list_kind.is_some(), "{}: list needs a list kind", r.name);
            }
        }
        // Subresources of one parent share its scope (the aggregator's converter errors otherwise).
        for a in RESOURCES {
            for b in RESOURCES {
                if let (Some((pa, _)), Some((pb, _))) = (a.split(), b.split())
                    && pa == pb
                {
                    assert_eq!(a.scope, b.scope);
                }
            }
        }
    }
}
