//! `/openapi/v2`: a Swagger 2.0 document shaped like kube-apiserver's.
//!
//! The aggregator merges it into the cluster's `/openapi/v2` (keeping only the paths under
//! `/apis/poddebug.dev/`); kubectl reads it with gnostic, which rejects unknown schema keywords
//! and dangling `$ref`s, and `kubectl explain --output=plaintext-openapiv2` finds a kind by the
//! `x-kubernetes-group-version-kind` of its definition.

use poddebug_types::API_VERSION;
use serde_json::{Map, Value, json};

use crate::dialect::Dialect;
use crate::operations::{Operation, Payload, paths_object, tag};
use crate::params::Param;
use crate::schemas::{definitions, gvk_extension};

/// The Swagger 2.0 document.
pub fn openapi_v2() -> Value {
    let out_paths = paths_object(path_param, operation);
    json!({
        "swagger": "2.0",
        "info": { "title": "poddebug", "version": API_VERSION },
        "paths": out_paths,
        "definitions": definitions(Dialect::Swagger2),
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "type": "apiKey",
                "name": "authorization",
                "in": "header",
            },
        },
        "security": [{ "BearerToken": [] }],
    })
}

fn path_param(p: &Param) -> Value {
    json!({
        "name": p.name,
        "in": "path",
        "description": p.description,
        "required": true,
        "type": p.ty.as_str(),
        "uniqueItems": true,
    })
}

fn query_param(p: &Param) -> Value {
    json!({
        "name": p.name,
        "in": "query",
        "description": p.description,
        "type": p.ty.as_str(),
        "uniqueItems": true,
    })
}

fn schema(payload: &Payload) -> Option<Value> {
    match payload {
        Payload::None => None,
        Payload::Object(name) => Some(Dialect::Swagger2.reference(name)),
        Payload::Text => Some(json!({ "type": "string" })),
    }
}

fn operation(op: &Operation) -> Value {
    let mut parameters: Vec<Value> = Vec::new();
    if let Some(body) = &op.body {
        parameters.push(json!({
            "name": "body",
            "in": "body",
            "required": true,
            "schema": Dialect::Swagger2.reference(body),
        }));
    }
    parameters.extend(op.query.iter().map(query_param));

    let mut responses = Map::new();
    for response in &op.responses {
        let mut r = Map::new();
        r.insert("description".to_owned(), json!(response.description));
        if let Some(schema) = schema(&response.payload) {
            r.insert("schema".to_owned(), schema);
        }
        responses.insert(response.code.to_string(), Value::Object(r));
    }

    let mut out = Map::new();
    out.insert("description".to_owned(), json!(op.description));
    out.insert("operationId".to_owned(), json!(op.id));
    out.insert("consumes".to_owned(), json!(op.consumes));
    out.insert("produces".to_owned(), json!(op.produces));
    out.insert("schemes".to_owned(), json!(["https"]));
    out.insert("tags".to_owned(), json!([tag()]));
    if !parameters.is_empty() {
        out.insert("parameters".to_owned(), Value::Array(parameters));
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
    use crate::dialect::SWAGGER2_KEYWORDS;
    use crate::testing::{assert_refs_resolve, schemas_in_v2};

    #[test]
    fn document_shape() {
        let doc = openapi_v2();
        assert_eq!(doc["swagger"], "2.0");
        assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());
        assert!(doc["paths"].as_object().is_some_and(|p| p.len() == 38));
    }

    #[test]
    fn every_ref_resolves() {
        let doc = openapi_v2();
        assert_refs_resolve(&doc, "#/definitions/", &doc["definitions"]);
    }

    #[test]
    fn only_swagger2_keywords_remain() {
        let doc = openapi_v2();
        let schemas = schemas_in_v2(&doc);
        assert!(schemas.len() > 50, "walked {} schemas", schemas.len());
        for (at, schema) in schemas {
            let Some(map) = schema.as_object() else {
                panic!("{at}: schema is not an object");
            };
            for key in map.keys() {
                assert!(
                    key.starts_with("x-") || SWAGGER2_KEYWORDS.contains(&key.as_str()),
                    "{at}: keyword {key} is not Swagger 2.0"
                );
            }
            if let Some(ty) = map.get("type") {
                assert!(ty.is_string(), "{at}: type {ty}");
                assert_ne!(ty, "null", "{at}");
            }
            if let Some(reference) = map.get("$ref") {
                assert!(
                    map.keys().all(|k| k == "$ref" || k == "description"),
                    "{at}: $ref siblings {:?}",
                    map.keys().collect::<Vec<_>>()
                );
                assert!(reference.is_string());
            }
            if let Some(additional) = map.get("additionalProperties") {
                assert!(additional.is_object() || additional.is_boolean(), "{at}");
            }
        }
    }

    #[test]
    fn kinds_have_their_gvk() {
        let doc = openapi_v2();
        for (name, gvk) in [
            (
                "dev.poddebug.v1alpha1.PodDebugContainer",
                json!({"group": "poddebug.dev", "kind": "PodDebugContainer", "version": "v1alpha1"}),
            ),
            (
                "dev.poddebug.v1alpha1.PodDebugContainerList",
                json!({"group": "poddebug.dev", "kind": "PodDebugContainerList", "version": "v1alpha1"}),
            ),
            (
                "dev.poddebug.v1alpha1.DebugProfile",
                json!({"group": "poddebug.dev", "kind": "DebugProfile", "version": "v1alpha1"}),
            ),
            (
                "dev.poddebug.v1alpha1.DebugProfileList",
                json!({"group": "poddebug.dev", "kind": "DebugProfileList", "version": "v1alpha1"}),
            ),
            (
                "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
                json!({"group": "", "kind": "Status", "version": "v1"}),
            ),
        ] {
            assert_eq!(
                doc["definitions"][name]["x-kubernetes-group-version-kind"],
                json!([gvk]),
                "{name}"
            );
        }
        for name in [
            "io.k8s.api.core.v1.Container",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
        ] {
            assert!(doc["definitions"][name].is_object(), "{name} missing");
        }
    }

    #[test]
    fn operations_carry_kube_extensions() {
        let doc = openapi_v2();
        let create = &doc["paths"]["/apis/poddebug.dev/v1alpha1/namespaces/{namespace}/pods/{name}/debug"]
            ["post"];
        assert_eq!(
            create["operationId"],
            "createPoddebugDevV1alpha1NamespacedPodDebug"
        );
        assert_eq!(create["x-kubernetes-action"], "post");
        assert_eq!(
            create["x-kubernetes-group-version-kind"],
            json!({"group": "poddebug.dev", "kind": "PodDebugContainer", "version": "v1alpha1"})
        );
        assert_eq!(
            create["parameters"][0],
            json!({"name": "body", "in": "body", "required": true,
                   "schema": {"$ref": "#/definitions/dev.poddebug.v1alpha1.PodDebugContainer"}})
        );
        assert_eq!(
            create["responses"]["201"]["schema"]["$ref"],
            "#/definitions/dev.poddebug.v1alpha1.PodDebugContainer"
        );
        let attach =
            &doc["paths"]["/apis/poddebug.dev/v1alpha1/namespaces/{namespace}/pods/{name}/attach"];
        assert_eq!(attach["get"]["x-kubernetes-action"], "connect");
        assert_eq!(
            attach["post"]["x-kubernetes-group-version-kind"],
            json!({"group": "", "kind": "PodAttachOptions", "version": "v1"})
        );
        assert_eq!(
            attach["parameters"],
            json!([
                {"name": "namespace", "in": "path", "required": true, "type": "string",
                 "uniqueItems": true,
                 "description": "object name and auth scope, such as for teams and projects"},
                {"name": "name", "in": "path", "required": true, "type": "string",
                 "uniqueItems": true, "description": "name of the Pod"},
            ])
        );
        let list = &doc["paths"]["/apis/poddebug.dev/v1alpha1/poddebugcontainers"]["get"];
        assert_eq!(list["x-kubernetes-action"], "list");
        assert_eq!(
            list["responses"]["200"]["schema"]["$ref"],
            "#/definitions/dev.poddebug.v1alpha1.PodDebugContainerList"
        );
        let watch = list["parameters"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["name"] == "watch"));
        assert_eq!(
            watch.map(|w| &w["type"]),
            Some(&json!("boolean")),
            "list takes ?watch"
        );
        let log = &doc["paths"]["/apis/poddebug.dev/v1alpha1/namespaces/{namespace}/pods/{name}/log"]
            ["get"];
        assert_eq!(log["responses"]["200"]["schema"], json!({"type": "string"}));
        assert_eq!(log["x-kubernetes-action"], "get");
    }
}
