//! Test helpers that walk OpenAPI documents the way strict parsers do.

use serde_json::Value;

/// Asserts that every `$ref` anywhere in `doc` starts with `prefix` and names a key of
/// `definitions`, and that no JSON Schema 2020-12 container of definitions is left.
pub(crate) fn assert_refs_resolve(doc: &Value, prefix: &str, definitions: &Value) {
    let mut count = 0;
    visit(doc, "#", &mut |at, value| {
        let Value::Object(map) = value else { return };
        assert!(!map.contains_key("$defs"), "{at}: $defs left");
        if let Some(reference) = map.get("$ref") {
            let reference = reference.as_str().unwrap_or_default();
            let name = reference
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("{at}: $ref {reference} outside {prefix}"));
            assert!(
                definitions.get(name).is_some_and(Value::is_object),
                "{at}: $ref {reference} does not resolve"
            );
            count += 1;
        }
    });
    assert!(count > 20, "only {count} $refs found");
}

fn visit(value: &Value, at: &str, f: &mut dyn FnMut(&str, &Value)) {
    f(at, value);
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                visit(child, &format!("{at}/{key}"), f);
            }
        }
        Value::Array(list) => {
            for (i, child) in list.iter().enumerate() {
                visit(child, &format!("{at}/{i}"), f);
            }
        }
        _ => {}
    }
}

/// Every schema of a Swagger 2.0 document, with where it is.
pub(crate) fn schemas_in_v2(doc: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    for (name, schema) in doc["definitions"].as_object().into_iter().flatten() {
        subschemas(schema, format!("definitions/{name}"), &mut out);
    }
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            for (i, param) in op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                if let Some(schema) = param.get("schema") {
                    subschemas(schema, format!("{path} {method} parameter {i}"), &mut out);
                }
            }
            for (code, response) in op["responses"].as_object().into_iter().flatten() {
                if let Some(schema) = response.get("schema") {
                    subschemas(schema, format!("{path} {method} {code}"), &mut out);
                }
            }
        }
    }
    out
}

/// Every schema of an OpenAPI 3.0 document, with where it is.
pub(crate) fn schemas_in_v3(doc: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    for (name, schema) in doc["components"]["schemas"]
        .as_object()
        .into_iter()
        .flatten()
    {
        subschemas(schema, format!("components/schemas/{name}"), &mut out);
    }
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (i, param) in item["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            subschemas(&param["schema"], format!("{path} parameter {i}"), &mut out);
        }
        for (method, op) in item.as_object().into_iter().flatten() {
            if method == "parameters" {
                continue;
            }
            for (i, param) in op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                subschemas(
                    &param["schema"],
                    format!("{path} {method} parameter {i}"),
                    &mut out,
                );
            }
            let bodies =
                op["requestBody"]["content"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(media, c)| (format!("{path} {method} body {media}"), c))
                    .chain(op["responses"].as_object().into_iter().flatten().flat_map(
                        |(code, r)| {
                            r["content"]
                                .as_object()
                                .into_iter()
                                .flatten()
                                .map(move |(media, c)| {
                                    (format!("{path} {method} {code} {media}"), c)
                                })
                        },
                    ));
            for (at, content) in bodies {
                subschemas(&content["schema"], at, &mut out);
            }
        }
    }
    out
}

fn subschemas<'a>(schema: &'a Value, at: String, out: &mut Vec<(String, &'a Value)>) {
    if let Some(map) = schema.as_object() {
        for (name, child) in map
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            subschemas(child, format!("{at}.{name}"), out);
        }
        for key in ["items", "additionalProperties", "not"] {
            if let Some(child) = map.get(key).filter(|c| c.is_object()) {
                subschemas(child, format!("{at}/{key}"), out);
            }
        }
        for key in ["allOf", "anyOf", "oneOf"] {
            for (i, child) in map
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                subschemas(child, format!("{at}/{key}/{i}"), out);
            }
        }
    }
    out.push((at, schema));
}
