//! The definitions of both OpenAPI documents, generated with schemars from the Rust types.
//!
//! The roots are our kinds and `meta/v1.Status`; every type they reference (core
//! `Container`, `ObjectMeta`, `ListMeta`, …) follows through k8s-openapi's `JsonSchema`
//! implementations, under kube's names (`io.k8s.api.core.v1.Container`). Each kind gets the
//! `x-kubernetes-group-version-kind` list kubectl uses to find the schema of a kind.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use poddebug_types::copy::{PodDebugCopy, PodDebugCopyList};
use poddebug_types::evidence::{RecordingEvidence, RecordingKey, RecordingKeyList};
use poddebug_types::node::{NodeDebugContainer, NodeDebugContainerList};
use poddebug_types::request::{Approval, DebugRequest, DebugRequestList};
use poddebug_types::{
    DebugProfile, DebugProfileList, DebugSession, DebugSessionList, PodDebugContainer,
    PodDebugContainerList, Recording, RecordingCommandList, RecordingList,
};
use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use crate::dialect::{Dialect, normalize, walk};
use crate::resources::Gvk;

/// A kind that has a definition, and the definition's name.
pub(crate) struct KindSchema {
    /// Group, version, kind.
    pub(crate) gvk: Gvk,
    /// Name of the definition (`dev.poddebug.v1alpha1.PodDebugContainer`).
    pub(crate) name: Cow<'static, str>,
}

/// Every kind with a definition and `x-kubernetes-group-version-kind`.
pub(crate) fn kinds() -> [KindSchema; 20] {
    [
        KindSchema {
            gvk: Gvk::poddebug("PodDebugContainer"),
            name: PodDebugContainer::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("PodDebugContainerList"),
            name: PodDebugContainerList::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("DebugProfile"),
            name: DebugProfile::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("DebugProfileList"),
            name: DebugProfileList::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("DebugRecording"),
            name: Recording::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("DebugRecordingList"),
            name: RecordingList::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("DebugRecordingCommandList"),
            name: RecordingCommandList::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("DebugRecordingEvidence"),
            name: RecordingEvidence::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("RecordingKey"),
            name: RecordingKey::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("RecordingKeyList"),
            name: RecordingKeyList::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("DebugSession"),
            name: DebugSession::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("DebugSessionList"),
            name: DebugSessionList::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("PodDebugCopy"),
            name: PodDebugCopy::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("PodDebugCopyList"),
            name: PodDebugCopyList::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("NodeDebugContainer"),
            name: NodeDebugContainer::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("NodeDebugContainerList"),
            name: NodeDebugContainerList::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("DebugRequest"),
            name: DebugRequest::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("DebugRequestList"),
            name: DebugRequestList::schema_name(),
        },
        KindSchema {
            gvk: Gvk::poddebug("DebugRequestApproval"),
            name: Approval::schema_name(),
        },
        KindSchema {
            gvk: Gvk::core("Status"),
            name: Status::schema_name(),
        },
    ]
}

/// Name of the definition of `kind` of `poddebug.dev/v1alpha1`, if it has one.
pub(crate) fn definition_name(gvk: Gvk) -> Option<Cow<'static, str>> {
    kinds().into_iter().find(|k| k.gvk == gvk).map(|k| k.name)
}

/// `{"group": …, "kind": …, "version": …}`, the object kube puts in
/// `x-kubernetes-group-version-kind` (a list of them on definitions, one on operations).
pub(crate) fn gvk_extension(gvk: Gvk) -> Value {
    json!({ "group": gvk.group, "kind": gvk.kind, "version": gvk.version })
}

/// Every definition of a document in `dialect`, sorted by name.
pub(crate) fn definitions(dialect: Dialect) -> Map<String, Value> {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = dialect.definitions_path().into();
        s.meta_schema = None;
        s.transforms = Vec::new();
    });
    let mut generator = SchemaGenerator::new(settings);
    // The returned `$ref`s are not needed: the roots are reached by name.
    let _ = generator.subschema_for::<PodDebugContainer>();
    let _ = generator.subschema_for::<PodDebugContainerList>();
    let _ = generator.subschema_for::<DebugProfile>();
    let _ = generator.subschema_for::<DebugProfileList>();
    let _ = generator.subschema_for::<RecordingList>();
    let _ = generator.subschema_for::<RecordingCommandList>();
    let _ = generator.subschema_for::<RecordingEvidence>();
    let _ = generator.subschema_for::<RecordingKeyList>();
    let _ = generator.subschema_for::<DebugSessionList>();
    let _ = generator.subschema_for::<PodDebugCopy>();
    let _ = generator.subschema_for::<PodDebugCopyList>();
    let _ = generator.subschema_for::<NodeDebugContainerList>();
    let _ = generator.subschema_for::<DebugRequestList>();
    let _ = generator.subschema_for::<Approval>();
    let _ = generator.subschema_for::<Status>();
    let mut raw = generator.take_definitions(false);
    let ours = PodDebugContainer::schema_name();
    let prefix = ours.rsplit_once('.').map_or("", |(prefix, _)| prefix);
    for (name, schema) in &mut raw {
        if name.starts_with(prefix) {
            walk(schema, &mut unwrap_doc_lines);
        }
    }
    let mut definitions = normalize(raw, dialect);

    for kind in kinds() {
        if let Some(Value::Object(schema)) = definitions.get_mut(kind.name.as_ref()) {
            schema.insert(
                "x-kubernetes-group-version-kind".to_owned(),
                Value::Array(vec![gvk_extension(kind.gvk)]),
            );
        }
    }
    definitions
}

/// Joins the lines of each paragraph of a description taken from rustdoc, as kube's generator
/// does with Go comments: kubectl wraps descriptions itself, and a line break kept from the
/// source would show up in the middle of its lines.
fn unwrap_doc_lines(node: &mut Value) {
    if let Some(Value::String(description)) = node.get_mut("description") {
        *description = description
            .split("\n\n")
            .map(|paragraph| {
                paragraph
                    .lines()
                    .map(str::trim)
                    .filter(|line| !line.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_and_references_are_defined() {
        for dialect in [Dialect::Swagger2, Dialect::OpenApi3] {
            let defs = definitions(dialect);
            for name in [
                "dev.poddebug.v1alpha1.PodDebugContainer",
                "dev.poddebug.v1alpha1.PodDebugContainerList",
                "dev.poddebug.v1alpha1.DebugProfile",
                "dev.poddebug.v1alpha1.DebugProfileList",
                "dev.poddebug.v1alpha1.PodDebugContainerStatus",
                "io.k8s.api.core.v1.Container",
                "io.k8s.api.core.v1.ContainerState",
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
                "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
                "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
            ] {
                assert!(defs.contains_key(name), "{dialect:?}: {name} missing");
            }
        }
    }

    #[test]
    fn kinds_carry_their_gvk() {
        let defs = definitions(Dialect::Swagger2);
        for (name, group, version, kind) in [
            (
                "dev.poddebug.v1alpha1.PodDebugContainer",
                "poddebug.dev",
                "v1alpha1",
                "PodDebugContainer",
            ),
            (
                "dev.poddebug.v1alpha1.PodDebugContainerList",
                "poddebug.dev",
                "v1alpha1",
                "PodDebugContainerList",
            ),
            (
                "dev.poddebug.v1alpha1.DebugProfile",
                "poddebug.dev",
                "v1alpha1",
                "DebugProfile",
            ),
            (
                "dev.poddebug.v1alpha1.DebugProfileList",
                "poddebug.dev",
                "v1alpha1",
                "DebugProfileList",
            ),
            (
                "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
                "",
                "v1",
                "Status",
            ),
        ] {
            assert_eq!(
                defs[name]["x-kubernetes-group-version-kind"],
                json!([{"group": group, "kind": kind, "version": version}]),
                "{name}"
            );
        }
    }

    #[test]
    fn our_descriptions_are_single_line_paragraphs() {
        let defs = definitions(Dialect::Swagger2);
        let pdc = &defs["dev.poddebug.v1alpha1.PodDebugContainer"];
        let text = pdc["description"].as_str().unwrap_or_default();
        assert!(text.starts_with("PodDebugContainer is"), "{text}");
        assert!(!text.contains('\n'), "{text}");
        let container = pdc["properties"]["container"]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(
            !container.is_empty() && !container.contains('\n'),
            "{container}"
        );
        let mut node = json!({"description": "a\nb\n\nc\n d"});
        unwrap_doc_lines(&mut node);
        assert_eq!(node["description"], "a b\n\nc d");
    }

    #[test]
    fn the_phase_enum_is_inlined() {
        let defs = definitions(Dialect::OpenApi3);
        assert!(!defs.contains_key("dev.poddebug.v1alpha1.DebugPhase"));
        let phase = &defs["dev.poddebug.v1alpha1.PodDebugContainerStatus"]["properties"]["phase"];
        assert_eq!(phase["type"], "string");
        assert_eq!(phase["enum"], json!(["Running", "Terminated", "Waiting"]));
    }

    #[test]
    fn optional_fields_are_not_required_and_not_nullable() {
        let defs = definitions(Dialect::Swagger2);
        let pdc = &defs["dev.poddebug.v1alpha1.PodDebugContainer"];
        assert_eq!(pdc["properties"]["targetContainerName"]["type"], "string");
        assert_eq!(
            pdc["properties"]["status"]["$ref"],
            "#/definitions/dev.poddebug.v1alpha1.PodDebugContainerStatus"
        );
        let required = pdc.get("required").and_then(Value::as_array);
        assert!(required.is_none_or(|r| !r.iter().any(|f| f == "status")));
    }

    #[test]
    fn the_time_limit_and_its_deadline_are_documented() {
        let defs = definitions(Dialect::OpenApi3);
        let ttl = &defs["dev.poddebug.v1alpha1.PodDebugContainer"]["properties"]["ttlSeconds"];
        assert_eq!(ttl["type"], "integer", "{ttl}");
        assert_eq!(ttl["format"], "int64", "{ttl}");
        let expires =
            &defs["dev.poddebug.v1alpha1.PodDebugContainerStatus"]["properties"]["expiresAt"];
        assert!(expires.to_string().contains("Time"), "{expires}");
    }
}
