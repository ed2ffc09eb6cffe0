//! Rewrites JSON Schema 2020-12 as schemars 1 emits it into the schema dialects of Swagger 2.0
//! and OpenAPI 3.0, shaped like kube-apiserver's own documents.
//!
//! kubectl parses OpenAPI v2 with gnostic, which rejects every keyword Swagger 2.0 does not
//! know, and reads OpenAPI v3 with templates that follow `$ref`, `allOf`, `items` and
//! `additionalProperties` only. So, recursively:
//!
//! * `"type": ["string", "null"]` loses its `null`; `nullable` is dropped (absence from
//!   `required` already says a field is optional);
//! * `anyOf`/`oneOf` alternatives that only allow `null` go, and a single remaining alternative
//!   is merged into its parent (`Option<T>`);
//! * an `anyOf`/`oneOf` of string constants (a documented Rust enum) becomes
//!   `"type": "string", "enum": [...]` with kube's "Possible enum values" list appended to the
//!   description, and such enum definitions are inlined where they are used, as kube does (kubectl
//!   explain shows an `enum` only when it is on the field itself);
//! * `const` becomes a one-value `enum`, `examples` a single `example`, numeric
//!   `exclusiveMinimum`/`exclusiveMaximum` the boolean form;
//! * nested `$defs`/`definitions` move to the document's definitions and every `$ref` is
//!   rewritten to the dialect's prefix;
//! * a `$ref` with siblings keeps only `description` next to it in Swagger 2.0, and is wrapped
//!   in `allOf: [{$ref}]` in OpenAPI 3.0;
//! * `default` is dropped (serde defaults are not server defaulting), as is every keyword the
//!   dialect does not know; Swagger 2.0 also loses the `anyOf`/`oneOf`/`not` it cannot express;
//! * `IntOrString` and `Quantity` get kube's shapes.

use serde_json::{Map, Value, json};

/// The schema dialect of an OpenAPI document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// Swagger 2.0, definitions under `#/definitions/`.
    Swagger2,
    /// OpenAPI 3.0, definitions under `#/components/schemas/`.
    OpenApi3,
}

impl Dialect {
    /// JSON pointer of the definitions, as schemars' `definitions_path` takes it.
    pub(crate) fn definitions_path(self) -> &'static str {
        match self {
            Dialect::Swagger2 => "/definitions",
            Dialect::OpenApi3 => "/components/schemas",
        }
    }

    /// Prefix of a `$ref` to a definition.
    pub(crate) fn ref_prefix(self) -> &'static str {
        match self {
            Dialect::Swagger2 => "#/definitions/",
            Dialect::OpenApi3 => "#/components/schemas/",
        }
    }

    /// A `$ref` to the definition `name`.
    pub(crate) fn reference(self, name: &str) -> Value {
        json!({ "$ref": format!("{}{name}", self.ref_prefix()) })
    }

    fn allowed(self, keyword: &str) -> bool {
        keyword.starts_with("x-")
            || match self {
                Dialect::Swagger2 => SWAGGER2_KEYWORDS.contains(&keyword),
                Dialect::OpenApi3 => OPENAPI3_KEYWORDS.contains(&keyword),
            }
    }
}

/// Keywords of a Swagger 2.0 Schema Object.
pub(crate) const SWAGGER2_KEYWORDS: &[&str] = &[
    "$ref",
    "format",
    "title",
    "description",
    "default",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "additionalProperties",
    "type",
    "items",
    "allOf",
    "properties",
    "discriminator",
    "readOnly",
    "xml",
    "externalDocs",
    "example",
];

/// Keywords of an OpenAPI 3.0 Schema Object.
pub(crate) const OPENAPI3_KEYWORDS: &[&str] = &[
    "$ref",
    "title",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "type",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "items",
    "properties",
    "additionalProperties",
    "description",
    "format",
    "default",
    "nullable",
    "discriminator",
    "readOnly",
    "writeOnly",
    "xml",
    "externalDocs",
    "example",
    "deprecated",
];

const ENUM_VALUES_HEADING: &str = "\n\nPossible enum values:";

/// Rewrites every definition (and the definitions nested in them) into `dialect`.
pub(crate) fn normalize(definitions: Map<String, Value>, dialect: Dialect) -> Map<String, Value> {
    // 1. Generic JSON Schema 2020-12 → OpenAPI shapes, hoisting nested definitions.
    let mut out = Map::new();
    let mut pending: Vec<(String, Value)> = definitions.into_iter().collect();
    while let Some((name, mut schema)) = pending.pop() {
        walk(&mut schema, &mut |node| {
            pending_defs(node, &mut pending);
            simplify(node, dialect);
        });
        out.insert(name, schema);
    }

    // 2. Inline enum definitions at their uses.
    let enums: Map<String, Value> = out
        .iter()
        .filter(|(_, schema)| is_enum_definition(schema))
        .map(|(name, schema)| (name.clone(), schema.clone()))
        .collect();
    for name in enums.keys() {
        out.remove(name);
    }
    for schema in out.values_mut() {
        walk(schema, &mut |node| inline_enum(node, &enums, dialect));
    }

    // 3. Dialect-specific shapes and keyword filtering.
    for (name, schema) in &mut out {
        walk(schema, &mut |node| finish(node, dialect));
        kube_shape(name, schema, dialect);
    }
    out
}

/// Calls `f` on every schema inside `value` (children first, then the schema itself).
pub(crate) fn walk(value: &mut Value, f: &mut dyn FnMut(&mut Value)) {
    if let Value::Object(node) = value {
        for (key, child) in node.iter_mut() {
            match key.as_str() {
                // Nested `$defs`/`definitions` are hoisted and rewritten on their own.
                "properties" | "patternProperties" => {
                    if let Value::Object(map) = child {
                        for schema in map.values_mut() {
                            walk(schema, f);
                        }
                    }
                }
                "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                    if let Value::Array(list) = child {
                        for schema in list {
                            walk(schema, f);
                        }
                    }
                }
                "items" => match child {
                    Value::Array(list) => {
                        for schema in list {
                            walk(schema, f);
                        }
                    }
                    _ => walk(child, f),
                },
                // `true`/`false` are meaningful here, not schemas to rewrite.
                "additionalProperties"
                | "additionalItems"
                | "unevaluatedProperties"
                | "unevaluatedItems"
                    if child.is_object() =>
                {
                    walk(child, f);
                }
                "not" | "contains" | "propertyNames" | "if" | "then" | "else" => {
                    walk(child, f);
                }
                _ => {}
            }
        }
    }
    f(value);
}

/// Moves nested `$defs`/`definitions` out of `node` into `pending`.
fn pending_defs(node: &mut Value, pending: &mut Vec<(String, Value)>) {
    let Value::Object(map) = node else { return };
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = map.remove(key) {
            pending.extend(defs);
        }
    }
}

/// Dialect-independent rewriting of one schema whose children are already rewritten.
fn simplify(node: &mut Value, dialect: Dialect) {
    let map = match node {
        Value::Bool(true) => {
            *node = json!({});
            return;
        }
        Value::Bool(false) => {
            *node = match dialect {
                Dialect::Swagger2 => json!({}),
                Dialect::OpenApi3 => json!({ "not": {} }),
            };
            return;
        }
        Value::Object(map) => map,
        _ => return,
    };

    if let Some(Value::String(reference)) = map.get_mut("$ref") {
        *reference = rewrite_ref(reference, dialect);
    }
    if let Some(value) = map.remove("const") {
        map.insert("enum".to_owned(), Value::Array(vec![value]));
    }
    if let Some(Value::Array(examples)) = map.remove("examples")
        && let Some(first) = examples.into_iter().next()
    {
        map.entry("example").or_insert(first);
    }
    for (exclusive, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(limit) = map.get(exclusive).filter(|v| v.is_number()).cloned() {
            map.insert(bound.to_owned(), limit);
            map.insert(exclusive.to_owned(), Value::Bool(true));
        }
    }
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        match types.len() {
            // Kept as `"null"` so that the parent `anyOf` can drop this alternative; `finish`
            // removes it when it stands alone.
            0 => {
                map.insert("type".to_owned(), json!("null"));
            }
            1 => {
                let single = types.remove(0);
                map.insert("type".to_owned(), single);
            }
            _ => {
                // Several non-null types cannot be said with one OpenAPI `type`.
                map.remove("type");
            }
        }
    }
    map.remove("nullable");
    map.remove("default");
    map.remove("$schema");
    map.remove("$id");
    map.remove("$comment");

    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(mut alternatives)) = map.remove(key) else {
            continue;
        };
        alternatives.retain(|alt| !allows_only_null(alt));
        if alternatives.is_empty() {
            continue;
        }
        if let Some(values) = string_constants(&alternatives) {
            collapse_enum(map, &alternatives, values);
        } else if alternatives.len() == 1 {
            if let Some(Value::Object(single)) = alternatives.pop() {
                for (k, v) in single {
                    map.entry(k).or_insert(v);
                }
            }
        } else {
            map.insert(key.to_owned(), Value::Array(alternatives));
        }
    }

    if map
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        map.remove("required");
    }
}

/// `#/$defs/X`, `#/definitions/X`, `#/components/schemas/X` → the dialect's prefix.
fn rewrite_ref(reference: &str, dialect: Dialect) -> String {
    for prefix in ["#/$defs/", "#/definitions/", "#/components/schemas/"] {
        if let Some(name) = reference.strip_prefix(prefix) {
            return format!("{}{name}", dialect.ref_prefix());
        }
    }
    reference.to_owned()
}

/// Whether a schema accepts nothing but `null`.
fn allows_only_null(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return false;
    };
    let null_type = map.get("type").is_some_and(|t| t == "null")
        || map
            .get("type")
            .and_then(Value::as_array)
            .is_some_and(|types| types.iter().all(|t| t == "null"));
    let null_enum = map
        .get("enum")
        .and_then(Value::as_array)
        .is_some_and(|values| values.iter().all(Value::is_null));
    (null_type || null_enum || map.get("const").is_some_and(Value::is_null))
        && !map.contains_key("$ref")
}

/// The values when every alternative is a one-value string `enum` (after `const` rewriting).
fn string_constants(alternatives: &[Value]) -> Option<Vec<String>> {
    alternatives
        .iter()
        .map(|alt| match alt.get("enum").and_then(Value::as_array) {
            Some(values) if values.len() == 1 && alt.get("$ref").is_none() => {
                values[0].as_str().map(str::to_owned)
            }
            _ => None,
        })
        .collect()
}

/// Turns a oneOf of documented string constants into kube's enum shape.
fn collapse_enum(map: &mut Map<String, Value>, alternatives: &[Value], mut values: Vec<String>) {
    let mut documented: Vec<(String, String)> = values
        .iter()
        .zip(alternatives)
        .map(|(value, alt)| {
            let doc = alt
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default();
            (value.clone(), doc.to_owned())
        })
        .collect();
    documented.sort();
    values.sort();
    let mut description = map
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    description.push_str(ENUM_VALUES_HEADING);
    for (value, doc) in documented {
        description.push_str(&format!("\n - `\"{value}\"`"));
        if !doc.is_empty() {
            description.push(' ');
            description.push_str(&doc);
        }
    }
    map.insert(
        "description".to_owned(),
        Value::String(description.trim_start().to_owned()),
    );
    map.insert("type".to_owned(), json!("string"));
    map.insert(
        "enum".to_owned(),
        Value::Array(values.into_iter().map(Value::String).collect()),
    );
}

/// A definition that is just a string enum (no properties), to be inlined.
fn is_enum_definition(schema: &Value) -> bool {
    schema.get("enum").is_some()
        && schema.get("type").is_some_and(|t| t == "string")
        && schema.get("properties").is_none()
}

/// Replaces a `$ref` to an enum definition by the definition, keeping the use's description
/// and the definition's list of values.
fn inline_enum(node: &mut Value, enums: &Map<String, Value>, dialect: Dialect) {
    let Some(name) = node
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(dialect.ref_prefix()))
    else {
        return;
    };
    let Some(Value::Object(definition)) = enums.get(name) else {
        return;
    };
    let Value::Object(map) = node else { return };
    map.remove("$ref");
    let mut merged = definition.clone();
    if let Some(Value::String(own)) = map.remove("description") {
        let values = definition
            .get("description")
            .and_then(Value::as_str)
            .and_then(|d| d.find(ENUM_VALUES_HEADING).map(|at| &d[at..]))
            .unwrap_or_default();
        merged.insert("description".to_owned(), Value::String(own + values));
    }
    for (k, v) in std::mem::take(map) {
        merged.entry(k).or_insert(v);
    }
    *map = merged;
}

/// Dialect-specific rewriting of one schema.
fn finish(node: &mut Value, dialect: Dialect) {
    let Value::Object(map) = node else { return };
    if map.get("type").is_some_and(|t| t == "null") {
        map.remove("type");
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
        if values.is_empty() {
            map.remove("enum");
        }
    }
    if dialect == Dialect::Swagger2 {
        // Swagger 2.0 cannot say "one of these"; the field stays untyped (any JSON), as
        // kube-apiserver's v2 document does for such fields.
        map.remove("anyOf");
        map.remove("oneOf");
        map.remove("not");
    }
    map.retain(|k, _| dialect.allowed(k));
    if let Some(reference) = map.get("$ref").cloned()
        && map.len() > 1
    {
        match dialect {
            Dialect::Swagger2 => {
                // gnostic and kube-openapi read `description` next to `$ref`; nothing else.
                map.retain(|k, _| k == "$ref" || k == "description");
            }
            Dialect::OpenApi3 => {
                map.remove("$ref");
                let entry = map
                    .entry("allOf")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(all_of) = entry {
                    all_of.push(json!({ "$ref": reference }));
                }
            }
        }
    }
}

/// kube-apiserver's shapes of the two types whose JSON is "a number or a string".
fn kube_shape(name: &str, schema: &mut Value, dialect: Dialect) {
    let description = schema.get("description").cloned();
    let mut shaped = match (name, dialect) {
        ("io.k8s.apimachinery.pkg.util.intstr.IntOrString", Dialect::Swagger2) => {
            json!({ "type": "string", "format": "int-or-string" })
        }
        ("io.k8s.apimachinery.pkg.util.intstr.IntOrString", Dialect::OpenApi3) => json!({
            "format": "int-or-string",
            "oneOf": [{ "type": "integer" }, { "type": "string" }],
        }),
        ("io.k8s.apimachinery.pkg.api.resource.Quantity", Dialect::Swagger2) => {
            json!({ "type": "string" })
        }
        ("io.k8s.apimachinery.pkg.api.resource.Quantity", Dialect::OpenApi3) => json!({
            "oneOf": [{ "type": "string" }, { "type": "number" }],
        }),
        _ => return,
    };
    if let (Some(description), Value::Object(map)) = (description, &mut shaped) {
        map.insert("description".to_owned(), description);
    }
    *schema = shaped;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(schema: Value, dialect: Dialect) -> Value {
        let mut defs = Map::new();
        defs.insert("T".to_owned(), schema);
        normalize(defs, dialect).remove("T").expect("kept")
    }

    #[test]
    fn option_of_a_scalar_loses_null() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": ["string", "null"], "description": "d"},
            "b": {"type": ["integer", "null"], "format": "int32", "default": null},
        }});
        for dialect in [Dialect::Swagger2, Dialect::OpenApi3] {
            assert_eq!(
                one(schema.clone(), dialect),
                json!({"type": "object", "properties": {
                    "a": {"type": "string", "description": "d"},
                    "b": {"type": "integer", "format": "int32"},
                }})
            );
        }
    }

    #[test]
    fn option_of_a_reference_becomes_the_reference() {
        let schema = json!({"type": "object", "properties": {
            "s": {"anyOf": [{"$ref": "#/$defs/S"}, {"type": "null"}], "description": "status"},
            "t": {"anyOf": [{"$ref": "#/$defs/S"}, {"type": "null"}]},
        }});
        assert_eq!(
            one(schema.clone(), Dialect::Swagger2)["properties"],
            json!({
                "s": {"$ref": "#/definitions/S", "description": "status"},
                "t": {"$ref": "#/definitions/S"},
            })
        );
        assert_eq!(
            one(schema, Dialect::OpenApi3)["properties"],
            json!({
                "s": {"allOf": [{"$ref": "#/components/schemas/S"}], "description": "status"},
                "t": {"$ref": "#/components/schemas/S"},
            })
        );
    }

    #[test]
    fn documented_enum_collapses_and_is_inlined() {
        let mut defs = Map::new();
        defs.insert(
            "Phase".to_owned(),
            json!({"description": "Phase.", "oneOf": [
                {"type": "string", "const": "Waiting", "description": "Not yet."},
                {"type": "string", "const": "Running", "description": "Runs."},
            ]}),
        );
        defs.insert(
            "Status".to_owned(),
            json!({"type": "object", "properties": {
                "phase": {"$ref": "#/$defs/Phase", "description": "The phase."},
                "plain": {"$ref": "#/$defs/Phase"},
            }}),
        );
        for dialect in [Dialect::Swagger2, Dialect::OpenApi3] {
            let out = normalize(defs.clone(), dialect);
            assert!(!out.contains_key("Phase"), "enum definitions are inlined");
            let props = &out["Status"]["properties"];
            assert_eq!(
                props["phase"],
                json!({
                    "type": "string",
                    "enum": ["Running", "Waiting"],
                    "description": "The phase.\n\nPossible enum values:\n - `\"Running\"` Runs.\n - `\"Waiting\"` Not yet.",
                })
            );
            assert_eq!(
                props["plain"]["description"],
                "Phase.\n\nPossible enum values:\n - `\"Running\"` Runs.\n - `\"Waiting\"` Not yet."
            );
        }
    }

    #[test]
    fn const_examples_and_unknown_keywords() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "const": "x",
            "examples": ["x"],
            "deprecated": true,
            "writeOnly": true,
            "unevaluatedProperties": false,
            "x-kubernetes-list-type": "atomic",
        });
        assert_eq!(
            one(schema.clone(), Dialect::Swagger2),
            json!({"enum": ["x"], "example": "x", "x-kubernetes-list-type": "atomic"})
        );
        assert_eq!(
            one(schema, Dialect::OpenApi3),
            json!({"enum": ["x"], "example": "x", "deprecated": true, "writeOnly": true,
                   "x-kubernetes-list-type": "atomic"})
        );
    }

    #[test]
    fn exclusive_bounds_and_booleans() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "exclusiveMinimum": 0},
            "any": true,
            "never": false,
        }, "additionalProperties": false});
        assert_eq!(
            one(schema.clone(), Dialect::Swagger2),
            json!({"type": "object", "properties": {
                "n": {"type": "integer", "minimum": 0, "exclusiveMinimum": true},
                "any": {},
                "never": {},
            }, "additionalProperties": false})
        );
        assert_eq!(
            one(schema, Dialect::OpenApi3)["properties"]["never"],
            json!({"not": {}})
        );
    }

    #[test]
    fn nested_defs_are_hoisted() {
        let schema = json!({
            "type": "object",
            "properties": {"inner": {"$ref": "#/$defs/Inner"}},
            "$defs": {"Inner": {"type": "object", "properties": {"x": {"const": 1}}}},
        });
        let mut defs = Map::new();
        defs.insert("Outer".to_owned(), schema);
        let out = normalize(defs, Dialect::Swagger2);
        assert_eq!(
            out["Outer"],
            json!({"type": "object", "properties": {"inner": {"$ref": "#/definitions/Inner"}}})
        );
        assert_eq!(
            out["Inner"],
            json!({"type": "object", "properties": {"x": {"enum": [1]}}})
        );
    }

    #[test]
    fn unexpressible_alternatives() {
        let schema =
            json!({"oneOf": [{"type": "integer"}, {"type": "string"}], "description": "d"});
        assert_eq!(
            one(schema.clone(), Dialect::Swagger2),
            json!({"description": "d"})
        );
        assert_eq!(one(schema.clone(), Dialect::OpenApi3), schema);
    }

    #[test]
    fn int_or_string_and_quantity_take_kube_shapes() {
        let mut defs = Map::new();
        for name in [
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
            "io.k8s.apimachinery.pkg.api.resource.Quantity",
        ] {
            defs.insert(
                name.to_owned(),
                json!({"description": "d", "x-kubernetes-int-or-string": true}),
            );
        }
        let v2 = normalize(defs.clone(), Dialect::Swagger2);
        assert_eq!(
            v2["io.k8s.apimachinery.pkg.util.intstr.IntOrString"],
            json!({"description": "d", "type": "string", "format": "int-or-string"})
        );
        assert_eq!(
            v2["io.k8s.apimachinery.pkg.api.resource.Quantity"],
            json!({"description": "d", "type": "string"})
        );
        let v3 = normalize(defs, Dialect::OpenApi3);
        assert_eq!(
            v3["io.k8s.apimachinery.pkg.util.intstr.IntOrString"],
            json!({"description": "d", "format": "int-or-string",
                   "oneOf": [{"type": "integer"}, {"type": "string"}]})
        );
        assert_eq!(
            v3["io.k8s.apimachinery.pkg.api.resource.Quantity"],
            json!({"description": "d", "oneOf": [{"type": "string"}, {"type": "number"}]})
        );
    }
}
