//! `/openapi/v3`: the index of group versions and the OpenAPI 3.0 document of
//! `apis/poddebug.dev/v1alpha1`, shaped like kube-apiserver's.
//!
//! kubectl ≥ 1.27 explains with this document: it finds the kind from the
//! `x-kubernetes-group-version-kind` of the `get` operation of `/apis/G/V/<resource>` (or
//! `/{name}`, or the namespaced forms), then the schema with the same GVK in
//! `components.schemas`.
//!
//! The index points at the document with `?hash=` set to the upper-case hex SHA-512 of the
//! document's bytes, as kube-openapi's `handler3` does (`fmt.Sprintf("%X", sha512.Sum512(...))`);
//! the same value, quoted, is the document's `ETag`.

use poddebug_types::{API_VERSION, GROUP, VERSION};
use serde_json::{Map, Value, json};

use crate::dialect::Dialect;
use crate::hash::content_hash;
use crate::operations::{Operation, Payload, paths_object, tag};
use crate::params::Param;
use crate::schemas::{definitions, gvk_extension};

/// `apis/poddebug.dev/v1alpha1`, the key of our document in the index.
pub fn group_version_key() -> String {
    format!("apis/{GROUP}/{VERSION}")
}

/// The OpenAPI 3.0 document of `apis/poddebug.dev/v1alpha1`.
pub fn openapi_v3_group_version() -> Value {
    let out_paths = paths_object(path_param, operation);
    json!({
        "openapi": "3.0.0",
        "info": { "title": "poddebug", "version": API_VERSION },
        "paths": out_paths,
        "components": {
            "schemas": definitions(Dialect::OpenApi3),
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header",
                },
            },
        },
        "security": [{ "BearerToken": [] }],
    })
}

/// The `/openapi/v3` index, pointing at [`openapi_v3_group_version`] with the hash of its
/// compact JSON serialization (the bytes [`crate::Documents`] serves).
pub fn openapi_v3_index() -> Value {
    openapi_v3_index_for(openapi_v3_group_version().to_string().as_bytes())
}

/// The index for a group-version document serialized as `document`.
pub(crate) fn openapi_v3_index_for(document: &[u8]) -> Value {
    let key = group_version_key();
    json!({
        "paths": {
            key.clone(): {
                "serverRelativeURL": format!("/openapi/v3/{key}?hash={}", content_hash(document)),
            },
        },
    })
}

fn path_param(p: &Param) -> Value {
    json!({
        "name": p.name,
        "in": "path",
        "description": p.description,
        "required": true,
        "schema": { "type": p.ty.as_str(), "uniqueItems": true },
    })
}

fn query_param(p: &Param) -> Value {
    json!({
        "name": p.name,
        "in": "query",
        "description": p.description,
        "schema": { "type": p.ty.as_str(), "uniqueItems": true },
    })
}

fn schema(payload: &Payload) -> Option<Value> {
    match payload {
        Payload::None => None,
        Payload::Object(name) => Some(Dialect::OpenApi3.reference(name)),
        Payload::Text => Some(json!({ "type": "string" })),
    }
}

fn operation(op: &Operation) -> Value {
    let mut responses = Map::new();
    for response in &op.responses {
        let mut r = Map::new();
        r.insert("description".to_owned(), json!(response.description));
        if let Some(schema) = schema(&response.payload) {
            let content: Map<String, Value> = op
                .produces
                .iter()
                .map(|media| ((*media).to_owned(), json!({ "schema": schema })))
                .collect();
            r.insert("content".to_owned(), Value::Object(content));
        }
        responses.insert(response.code.to_string(), Value::Object(r));
    }

    let mut out = Map::new();
    out.insert("tags".to_owned(), json!([tag()]));
    out.insert("description".to_owned(), json!(op.description));
    out.insert("operationId".to_owned(), json!(op.id));
    if !op.query.is_empty() {
        out.insert(
            "parameters".to_owned(),
            Value::Array(op.query.iter().map(query_param).collect()),
        );
    }
    if let Some(body) = &op.body {
        let content: Map<String, Value> = op
            .consumes
            .iter()
            .map(|media| {
                (
                    (*media).to_owned(),
                    json!({ "schema": Dialect::OpenApi3.reference(body) }),
                )
            })
            .collect();
        out.insert(
            "requestBody".to_owned(),
            json!({ "content": content, "required": true }),
        );
    }
    out.insert("responses".to_owned(), Value::Object(responses));
    out.insert("x-kubernetes-action".to_owned(), json!(op.action));
    out.insert(
        "x-kubernetes-group-version-kind".to_owned(),
        gvk_extension(op.gvk),
    );
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::OPENAPI3_KEYWORDS;
    use crate::testing::{assert_refs_resolve, schemas_in_v3};

    #[test]
    fn document_shape() {
        let doc = openapi_v3_group_version();
        assert_eq!(doc["openapi"], "3.0.0");
        assert!(doc["paths"].as_object().is_some_and(|p| p.len() == 38));
        assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.Container"].is_object());
    }

    #[test]
    fn every_ref_resolves() {
        let doc = openapi_v3_group_version();
        assert_refs_resolve(&doc, "#/components/schemas/", &doc["components"]["schemas"]);
    }

    #[test]
    fn only_openapi3_keywords_remain() {
        let doc = openapi_v3_group_version();
        let schemas = schemas_in_v3(&doc);
        assert!(schemas.len() > 50, "walked {} schemas", schemas.len());
        for (at, schema) in schemas {
            let Some(map) = schema.as_object() else {
                panic!("{at}: schema is not an object");
            };
            for key in map.keys() {
                assert!(
                    key.starts_with("x-") || OPENAPI3_KEYWORDS.contains(&key.as_str()),
                    "{at}: keyword {key} is not OpenAPI 3.0"
                );
            }
            assert!(!map.contains_key("nullable"), "{at}");
            if let Some(ty) = map.get("type") {
                assert!(ty.is_string(), "{at}: type {ty}");
            }
            if map.contains_key("$ref") {
                assert_eq!(map.len(), 1, "{at}: $ref has siblings");
            }
        }
    }

    #[test]
    fn kubectl_explain_finds_the_kinds() {
        // What kubectl's explain template does: GVK of the get operation of the resource path,
        // then the schema whose x-kubernetes-group-version-kind contains it.
        let doc = openapi_v3_group_version();
        for (path, kind) in [
            (
                "/apis/poddebug.dev/v1alpha1/poddebugcontainers",
                "dev.poddebug.v1alpha1.PodDebugContainer",
            ),
            (
                "/apis/poddebug.dev/v1alpha1/namespaces/{namespace}/poddebugcontainers/{name}",
                "dev.poddebug.v1alpha1.PodDebugContainer",
            ),
            (
                "/apis/poddebug.dev/v1alpha1/debugprofiles",
                "dev.poddebug.v1alpha1.DebugProfile",
            ),
        ] {
            let gvk = &doc["paths"][path]["get"]["x-kubernetes-group-version-kind"];
            assert!(gvk.is_object(), "{path}");
            let found: Vec<&String> = doc["components"]["schemas"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(_, s)| {
                    s["x-kubernetes-group-version-kind"]
                        .as_array()
                        .is_some_and(|l| l.contains(gvk))
                })
                .map(|(name, _)| name)
                .collect();
            assert_eq!(found, [kind], "{path}");
        }
    }

    #[test]
    fn request_and_response_bodies() {
        let doc = openapi_v3_group_version();
        let create = &doc["paths"]["/apis/poddebug.dev/v1alpha1/namespaces/{namespace}/pods/{name}/debug/{container}"]
            ["post"];
        assert_eq!(
            create["requestBody"],
            json!({"content": {"*/*": {"schema": {
                "$ref": "#/components/schemas/dev.poddebug.v1alpha1.PodDebugContainer"}}},
                "required": true})
        );
        assert_eq!(
            create["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/dev.poddebug.v1alpha1.PodDebugContainer"
        );
        let list = &doc["paths"]["/apis/poddebug.dev/v1alpha1/poddebugcontainers"]["get"];
        assert!(list["responses"]["200"]["content"]["application/json;stream=watch"].is_object());
        let delete = &doc["paths"]["/apis/poddebug.dev/v1alpha1/namespaces/{namespace}/pods/{name}/debug/{container}"]
            ["delete"];
        assert_eq!(delete["x-kubernetes-action"], "delete");
        assert_eq!(delete["parameters"][0]["name"], "gracePeriodSeconds");
        assert_eq!(
            delete["parameters"][0]["schema"],
            json!({"type": "integer", "uniqueItems": true})
        );
    }

    #[test]
    fn index_points_at_the_document_by_hash() {
        let doc = openapi_v3_group_version().to_string();
        let index = openapi_v3_index();
        let url = index["paths"]["apis/poddebug.dev/v1alpha1"]["serverRelativeURL"]
            .as_str()
            .expect("url");
        let hash = url
            .strip_prefix("/openapi/v3/apis/poddebug.dev/v1alpha1?hash=")
            .expect("prefix");
        assert_eq!(hash.len(), 128);
        assert!(
            hash.chars()
                .all(|c| c.is_ascii_digit() || ('A'..='F').contains(&c))
        );
        assert_eq!(hash, content_hash(doc.as_bytes()));
        assert_eq!(index["paths"].as_object().map(Map::len), Some(1));
    }
}
