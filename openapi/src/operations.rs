//! The endpoints of the group, derived from [`RESOURCES`], before they are written as OpenAPI
//! v2 or v3.
//!
//! Operation IDs, tags, descriptions and `x-kubernetes-action` follow kube-apiserver's
//! conventions (`GetOperationIDAndTags`): `listPoddebugDevV1alpha1NamespacedPodDebugContainer`,
//! `connectPoddebugDevV1alpha1GetNamespacedPodAttach`, tag `poddebugDev_v1alpha1`.
//! kube has no precedent for one object of a subresource collection (`…/debug/{container}`);
//! those operations get the suffix `WithContainer`, after kube's `…ProxyWithPath`.

use std::borrow::Cow;

use poddebug_types::{GROUP, VERSION};

use crate::params::{
    ALLOW_WATCH_BOOKMARKS, FIELD_SELECTOR, GRACE_PERIOD_SECONDS, LABEL_SELECTOR,
    LIST_TIMEOUT_SECONDS, NAMESPACE, Param, ParamType, RESOURCE_VERSION, WAIT,
    WAIT_TIMEOUT_SECONDS, WATCH,
};
use crate::resources::{Gvk, RESOURCES, Resource, Scope, Shape, Verb, group_version_path};
use crate::schemas::definition_name;

/// Media types of a JSON answer.
const JSON: &[&str] = &["application/json"];
/// Media types of a list that can also be watched.
const JSON_AND_WATCH: &[&str] = &["application/json", "application/json;stream=watch"];
/// Media types of a log.
const TEXT: &[&str] = &["text/plain"];
/// Anything, as kube-apiserver declares for bodies and connect endpoints.
const ANY: &[&str] = &["*/*"];

/// HTTP method of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Post,
    Delete,
}

impl Method {
    /// The key of the operation in a path item.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Method::Get => "get",
            Method::Post => "post",
            Method::Delete => "delete",
        }
    }
}

/// What a response (or request) body holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Payload {
    /// Nothing.
    None,
    /// An object of the named definition.
    Object(Cow<'static, str>),
    /// A string (log text, or the stream of a connect endpoint).
    Text,
}

/// One response of an operation.
#[derive(Clone, Debug)]
pub(crate) struct Response {
    pub(crate) code: u16,
    pub(crate) description: &'static str,
    pub(crate) payload: Payload,
}

/// One operation (method of a path).
#[derive(Clone, Debug)]
pub(crate) struct Operation {
    pub(crate) method: Method,
    pub(crate) id: String,
    pub(crate) description: String,
    /// `x-kubernetes-action`.
    pub(crate) action: &'static str,
    /// `x-kubernetes-group-version-kind`.
    pub(crate) gvk: Gvk,
    pub(crate) query: Vec<Param>,
    /// Required request body, for create.
    pub(crate) body: Option<Cow<'static, str>>,
    pub(crate) responses: Vec<Response>,
    pub(crate) consumes: &'static [&'static str],
    pub(crate) produces: &'static [&'static str],
}

/// One path with its parameters and operations.
#[derive(Clone, Debug)]
pub(crate) struct PathItem {
    pub(crate) path: String,
    pub(crate) params: Vec<Param>,
    pub(crate) operations: Vec<Operation>,
}

/// `poddebugDev_v1alpha1`, the tag of every operation.
pub(crate) fn tag() -> String {
    let mut group = group_camel();
    if let Some(first) = group.get(..1) {
        group = first.to_lowercase() + &group[1..];
    }
    format!("{group}_{VERSION}")
}

/// `PoddebugDevV1alpha1`, the infix of every operation ID.
fn group_version_camel() -> String {
    format!("{}{}", group_camel(), title(VERSION))
}

/// `poddebug.dev` → `PoddebugDev` (kube drops a `.k8s.io` suffix, which we do not have).
fn group_camel() -> String {
    let trimmed = GROUP.strip_suffix(".k8s.io").unwrap_or(GROUP);
    trimmed.split('.').map(title).collect()
}

fn title(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `{action}PoddebugDevV1alpha1{rest}`.
fn operation_id(action: &str, rest: &str) -> String {
    format!("{action}{}{rest}", group_version_camel())
}

/// Every path, sorted.
pub(crate) fn paths() -> Vec<PathItem> {
    let mut items: Vec<PathItem> = Vec::new();
    for r in RESOURCES {
        let generated = match r.shape {
            Shape::Objects => objects(r),
            Shape::NestedCollection {
                item,
                item_description,
            } => nested_collection(r, item, item_description),
            Shape::Connect { options } => connect(r, options),
            Shape::Create => create_only(r),
            Shape::Action { body } => action(r, body),
            Shape::Text { options } => text(r, options),
            Shape::Files {
                item,
                item_description,
                media_types,
                derived,
                options,
            } => files(r, item, item_description, media_types, derived, options),
        };
        for item in generated {
            match items.iter_mut().find(|i| i.path == item.path) {
                Some(existing) => existing.operations.extend(item.operations),
                None => items.push(item),
            }
        }
    }
    items.retain(|i| !i.operations.is_empty());
    items.sort_by(|a, b| a.path.cmp(&b.path));
    items
}

fn name_param(kind: &str) -> Param {
    Param {
        name: "name",
        ty: ParamType::String,
        description: name_description(kind),
    }
}

/// `name of the <Kind>`, for the kinds that appear in path templates.
fn name_description(kind: &str) -> &'static str {
    match kind {
        "Pod" => "name of the Pod",
        "Node" => "name of the Node",
        "PodDebugContainer" => "name of the PodDebugContainer",
        "DebugProfile" => "name of the DebugProfile",
        "DebugSession" => "name of the DebugSession",
        "DebugRequest" => "name of the DebugRequest",
        _ => "name of the object",
    }
}

fn list_query(r: &Resource) -> Vec<Param> {
    let mut query = vec![FIELD_SELECTOR, LABEL_SELECTOR];
    if r.supports(Verb::Watch) {
        query.extend([
            ALLOW_WATCH_BOOKMARKS,
            RESOURCE_VERSION,
            LIST_TIMEOUT_SECONDS,
            WATCH,
        ]);
    }
    query
}

fn list_description(r: &Resource) -> String {
    if r.supports(Verb::Watch) {
        format!("list or watch objects of kind {}", r.kind.kind)
    } else {
        format!("list objects of kind {}", r.kind.kind)
    }
}

fn object_payload(gvk: Gvk) -> Payload {
    definition_name(gvk).map_or(Payload::None, Payload::Object)
}

fn list_payload(r: &Resource) -> Payload {
    match r.list_kind {
        Some(kind) => object_payload(Gvk { kind, ..r.kind }),
        None => Payload::None,
    }
}

fn ok(payload: Payload) -> Response {
    Response {
        code: 200,
        description: "OK",
        payload,
    }
}

fn unauthorized() -> Response {
    Response {
        code: 401,
        description: "Unauthorized",
        payload: Payload::None,
    }
}

fn created_responses(gvk: Gvk) -> Vec<Response> {
    vec![
        ok(object_payload(gvk)),
        Response {
            code: 201,
            description: "Created",
            payload: object_payload(gvk),
        },
        Response {
            code: 202,
            description: "Accepted",
            payload: object_payload(gvk),
        },
        unauthorized(),
    ]
}

fn deleted_responses(gvk: Gvk) -> Vec<Response> {
    vec![
        ok(object_payload(gvk)),
        Response {
            code: 202,
            description: "Accepted",
            payload: object_payload(gvk),
        },
        unauthorized(),
    ]
}

/// A standard resource: collection and `{name}` paths.
fn objects(r: &Resource) -> Vec<PathItem> {
    let base = group_version_path();
    let kind = r.kind.kind;
    let (collection, scope_params, namespaced) = match r.scope {
        Scope::Namespaced => (
            format!("{base}/namespaces/{{namespace}}/{}", r.name),
            vec![NAMESPACE],
            "Namespaced",
        ),
        Scope::Cluster => (format!("{base}/{}", r.name), Vec::new(), ""),
    };
    let mut out = Vec::new();

    if r.scope == Scope::Namespaced && r.supports(Verb::List) {
        out.push(PathItem {
            path: format!("{base}/{}", r.name),
            params: Vec::new(),
            operations: vec![Operation {
                method: Method::Get,
                id: operation_id("list", &format!("{kind}ForAllNamespaces")),
                description: list_description(r),
                action: "list",
                gvk: r.kind,
                query: list_query(r),
                body: None,
                responses: vec![ok(list_payload(r)), unauthorized()],
                consumes: ANY,
                produces: produces_for_list(r),
            }],
        });
    }

    let mut collection_ops = Vec::new();
    if r.supports(Verb::List) {
        collection_ops.push(Operation {
            method: Method::Get,
            id: operation_id("list", &format!("{namespaced}{kind}")),
            description: list_description(r),
            action: "list",
            gvk: r.kind,
            query: list_query(r),
            body: None,
            responses: vec![ok(list_payload(r)), unauthorized()],
            consumes: ANY,
            produces: produces_for_list(r),
        });
    }
    if r.supports(Verb::Create) {
        collection_ops.push(create_operation(
            r,
            operation_id("create", &format!("{namespaced}{kind}")),
            format!("create a {kind}"),
        ));
    }
    if r.supports(Verb::DeleteCollection) {
        collection_ops.push(Operation {
            method: Method::Delete,
            id: operation_id("deletecollection", &format!("{namespaced}{kind}")),
            description: format!("delete collection of {kind}"),
            action: "deletecollection",
            gvk: r.kind,
            query: vec![FIELD_SELECTOR, LABEL_SELECTOR],
            body: None,
            responses: vec![ok(list_payload(r)), unauthorized()],
            consumes: ANY,
            produces: JSON,
        });
    }
    out.push(PathItem {
        path: collection.clone(),
        params: scope_params.clone(),
        operations: collection_ops,
    });

    let mut item_ops = Vec::new();
    if r.supports(Verb::Get) {
        item_ops.push(Operation {
            method: Method::Get,
            id: operation_id("read", &format!("{namespaced}{kind}")),
            description: format!("read the specified {kind}"),
            action: "get",
            gvk: r.kind,
            query: Vec::new(),
            body: None,
            responses: vec![ok(object_payload(r.kind)), unauthorized()],
            consumes: ANY,
            produces: JSON,
        });
    }
    if r.supports(Verb::Delete) {
        item_ops.push(delete_operation(
            r,
            operation_id("delete", &format!("{namespaced}{kind}")),
            format!("delete a {kind}"),
        ));
    }
    let mut item_params = scope_params;
    item_params.push(name_param(kind));
    out.push(PathItem {
        path: format!("{collection}/{{name}}"),
        params: item_params,
        operations: item_ops,
    });
    out
}

fn produces_for_list(r: &Resource) -> &'static [&'static str] {
    if r.supports(Verb::Watch) {
        JSON_AND_WATCH
    } else {
        JSON
    }
}

fn create_operation(r: &Resource, id: String, description: String) -> Operation {
    Operation {
        method: Method::Post,
        id,
        description,
        action: "post",
        gvk: r.kind,
        // `?wait=true` is a debug container's.
        query: if r.kind == Gvk::poddebug("PodDebugContainer") {
            vec![WAIT_TIMEOUT_SECONDS, WAIT]
        } else {
            Vec::new()
        },
        body: definition_name(r.kind),
        responses: created_responses(r.kind),
        consumes: ANY,
        produces: JSON,
    }
}

fn delete_operation(r: &Resource, id: String, description: String) -> Operation {
    Operation {
        method: Method::Delete,
        id,
        description,
        action: "delete",
        gvk: r.kind,
        query: vec![GRACE_PERIOD_SECONDS],
        body: None,
        responses: deleted_responses(r.kind),
        consumes: ANY,
        produces: JSON,
    }
}

/// `…/{parent}/{name}/{sub}`, its parameters and the operation-ID noun (`NamespacedPodDebug`).
fn subresource_base(r: &Resource) -> (String, Vec<Param>, String) {
    let base = group_version_path();
    let (parent, sub) = r.split().unwrap_or((r.name, ""));
    let parent_param = name_param(r.parent_kind);
    match r.scope {
        Scope::Namespaced => (
            format!("{base}/namespaces/{{namespace}}/{parent}/{{name}}/{sub}"),
            vec![NAMESPACE, parent_param],
            format!("Namespaced{}{}", r.parent_kind, title(sub)),
        ),
        Scope::Cluster => (
            format!("{base}/{parent}/{{name}}/{sub}"),
            vec![parent_param],
            format!("{}{}", r.parent_kind, title(sub)),
        ),
    }
}

/// `pods/copy`: `POST` on the subresource makes an object.
fn create_only(r: &Resource) -> Vec<PathItem> {
    let (path, params, noun) = subresource_base(r);
    let (_, sub) = r.split().unwrap_or((r.name, ""));
    vec![PathItem {
        path,
        params,
        operations: vec![create_operation(
            r,
            operation_id("create", &noun),
            format!(
                "create a {} from {sub} of the specified {}",
                r.kind.kind, r.parent_kind
            ),
        )],
    }]
}

/// `debugrequests/approval`: `POST` on the subresource, with a body of kind `body`, changes
/// the parent and answers it.
fn action(r: &Resource, body: Gvk) -> Vec<PathItem> {
    let (path, params, noun) = subresource_base(r);
    let (_, sub) = r.split().unwrap_or((r.name, ""));
    let mut op = create_operation(
        r,
        operation_id("create", &noun),
        format!("create {sub} of the specified {}", r.parent_kind),
    );
    op.body = definition_name(body);
    vec![PathItem {
        path,
        params,
        operations: vec![op],
    }]
}

/// `pods/debug`: a collection under the pod, and one object of it.
fn nested_collection(
    r: &Resource,
    item: &'static str,
    item_description: &'static str,
) -> Vec<PathItem> {
    let (path, params, noun) = subresource_base(r);
    let (_, sub) = r.split().unwrap_or((r.name, ""));
    let one = format!("{noun}With{}", title(item));

    let mut collection_ops = Vec::new();
    if r.supports(Verb::List) {
        collection_ops.push(Operation {
            method: Method::Get,
            id: operation_id("list", &noun),
            description: format!(
                "list objects of kind {} under {sub} of the specified {}",
                r.kind.kind, r.parent_kind
            ),
            action: "list",
            gvk: r.kind,
            query: list_query(r),
            body: None,
            responses: vec![ok(list_payload(r)), unauthorized()],
            consumes: ANY,
            produces: produces_for_list(r),
        });
    }
    if r.supports(Verb::Create) {
        collection_ops.push(create_operation(
            r,
            operation_id("create", &noun),
            format!(
                "create a {} under {sub} of the specified {}",
                r.kind.kind, r.parent_kind
            ),
        ));
    }

    let mut item_ops = Vec::new();
    if r.supports(Verb::Get) {
        item_ops.push(Operation {
            method: Method::Get,
            id: operation_id("read", &one),
            description: format!(
                "read the specified {} under {sub} of the specified {}",
                r.kind.kind, r.parent_kind
            ),
            action: "get",
            gvk: r.kind,
            query: Vec::new(),
            body: None,
            responses: vec![ok(object_payload(r.kind)), unauthorized()],
            consumes: ANY,
            produces: JSON,
        });
    }
    if r.supports(Verb::Create) {
        item_ops.push(create_operation(
            r,
            operation_id("create", &one),
            format!(
                "create a {} named by the path under {sub} of the specified {}",
                r.kind.kind, r.parent_kind
            ),
        ));
    }
    if r.supports(Verb::Delete) {
        item_ops.push(delete_operation(
            r,
            operation_id("delete", &one),
            format!(
                "stop the processes of the specified {} under {sub} of the specified {} (its entry stays in the {}'s spec)",
                r.kind.kind, r.parent_kind, r.parent_kind
            ),
        ));
    }

    let mut item_params = params.clone();
    item_params.push(Param {
        name: item,
        ty: ParamType::String,
        description: item_description,
    });
    vec![
        PathItem {
            path: path.clone(),
            params,
            operations: collection_ops,
        },
        PathItem {
            path: format!("{path}/{{{item}}}"),
            params: item_params,
            operations: item_ops,
        },
    ]
}

/// `pods/attach`: `GET` (WebSocket) and `POST` (SPDY) upgrades.
fn connect(r: &Resource, options: &'static [Param]) -> Vec<PathItem> {
    let (path, params, noun) = subresource_base(r);
    let (_, sub) = r.split().unwrap_or((r.name, ""));
    let methods = [
        (Verb::Get, Method::Get, "Get", "GET"),
        (Verb::Create, Method::Post, "Post", "POST"),
    ];
    let operations = methods
        .into_iter()
        .filter(|(verb, ..)| r.supports(*verb))
        .map(|(_, method, camel, upper)| Operation {
            method,
            id: operation_id("connect", &format!("{camel}{noun}")),
            description: format!("connect {upper} requests to {sub} of {}", r.parent_kind),
            action: "connect",
            gvk: r.kind,
            query: options.to_vec(),
            body: None,
            responses: vec![ok(Payload::Text), unauthorized()],
            consumes: ANY,
            produces: ANY,
        })
        .collect();
    vec![PathItem {
        path,
        params,
        operations,
    }]
}

/// `pods/log`: `GET` answering text.
fn text(r: &Resource, options: &'static [Param]) -> Vec<PathItem> {
    let (path, params, noun) = subresource_base(r);
    let (_, sub) = r.split().unwrap_or((r.name, ""));
    let operations = if r.supports(Verb::Get) {
        vec![Operation {
            method: Method::Get,
            id: operation_id("read", &noun),
            description: format!(
                "read {sub} of a debug container of the specified {}",
                r.parent_kind
            ),
            action: "get",
            gvk: r.kind,
            query: options.to_vec(),
            body: None,
            responses: vec![ok(Payload::Text), unauthorized()],
            consumes: ANY,
            produces: TEXT,
        }]
    } else {
        Vec::new()
    };
    vec![PathItem {
        path,
        params,
        operations,
    }]
}

/// `pods/recordings`: `get` of the list (JSON), of one file (its own media type), and of what is
/// derived from one file (JSON).
fn files(
    r: &Resource,
    item: &'static str,
    item_description: &'static str,
    media_types: &'static [&'static str],
    derived: &'static [(&'static str, &'static str)],
    options: &'static [Param],
) -> Vec<PathItem> {
    let (path, params, noun) = subresource_base(r);
    let (_, sub) = r.split().unwrap_or((r.name, ""));
    if !r.supports(Verb::Get) {
        return Vec::new();
    }
    let list = Operation {
        method: Method::Get,
        id: operation_id("read", &noun),
        description: format!("list {sub} of the specified {}", r.parent_kind),
        action: "get",
        gvk: r.kind,
        query: Vec::new(),
        body: None,
        responses: vec![ok(object_payload(r.kind)), unauthorized()],
        consumes: ANY,
        produces: JSON,
    };
    let one = Operation {
        method: Method::Get,
        id: operation_id("read", &format!("{noun}With{}", title(item))),
        description: format!("read one of the {sub} of the specified {}", r.parent_kind),
        action: "get",
        gvk: r.kind,
        query: options.to_vec(),
        body: None,
        responses: vec![ok(Payload::Text), unauthorized()],
        consumes: ANY,
        produces: media_types,
    };
    let mut item_params = params.clone();
    item_params.push(Param {
        name: item,
        ty: ParamType::String,
        description: item_description,
    });
    let mut items = vec![
        PathItem {
            path: path.clone(),
            params,
            operations: vec![list],
        },
        PathItem {
            path: format!("{path}/{{{item}}}"),
            params: item_params.clone(),
            operations: vec![one],
        },
    ];
    for (name, kind) in derived {
        let gvk = Gvk::poddebug(kind);
        items.push(PathItem {
            path: format!("{path}/{{{item}}}/{name}"),
            params: item_params.clone(),
            operations: vec![Operation {
                method: Method::Get,
                id: operation_id("read", &format!("{noun}With{}{}", title(item), title(name))),
                description: format!(
                    "read the {name} of one of the {sub} of the specified {}",
                    r.parent_kind
                ),
                action: "get",
                gvk,
                query: Vec::new(),
                body: None,
                responses: vec![ok(object_payload(gvk)), unauthorized()],
                consumes: ANY,
                produces: JSON,
            }],
        });
    }
    items
}

/// The `paths` object of either dialect: every path item with its shared path parameters and
/// operations, rendered by the dialect's `path_param` and `operation`.
pub(crate) fn paths_object(
    path_param: fn(&Param) -> serde_json::Value,
    operation: fn(&Operation) -> serde_json::Value,
) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    for item in paths() {
        let mut path_item = serde_json::Map::new();
        if !item.params.is_empty() {
            path_item.insert(
                "parameters".to_owned(),
                serde_json::Value::Array(item.params.iter().map(path_param).collect()),
            );
        }
        for op in &item.operations {
            path_item.insert(op.method.key().to_owned(), operation(op));
        }
        out.insert(item.path, serde_json::Value::Object(path_item));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn find<'a>(items: &'a [PathItem], path: &str) -> &'a PathItem {
        items
            .iter()
            .find(|i| i.path == path)
            .unwrap_or_else(|| panic!("{path} missing"))
    }

    #[test]
    fn every_endpoint_is_there() {
        let items = paths();
        let p = "/apis/poddebug.dev/v1alpha1";
        let expected: Vec<(String, Vec<&str>)> = vec![
            (format!("{p}/debugprofiles"), vec!["get"]),
            (format!("{p}/debugprofiles/{{name}}"), vec!["get"]),
            (format!("{p}/debugrecordings"), vec!["get"]),
            (format!("{p}/debugrequests"), vec!["get"]),
            (format!("{p}/debugsessions"), vec!["get"]),
            (
                format!("{p}/namespaces/{{namespace}}/debugrecordings"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/debugrecordings/{{name}}"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/debugrequests"),
                vec!["get", "post", "delete"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/debugrequests/{{name}}"),
                vec!["get", "delete"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/debugrequests/{{name}}/approval"),
                vec!["post"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/debugsessions"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/debugsessions/{{name}}"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/poddebugcontainers"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/poddebugcontainers/{{name}}"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/poddebugcopies"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/poddebugcopies/{{name}}"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/attach"),
                vec!["get", "post"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/copies"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/copies/{{copy}}"),
                vec!["get", "delete"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/copy"),
                vec!["post"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/debug"),
                vec!["get", "post"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/debug/{{container}}"),
                vec!["get", "post", "delete"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/log"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/recordings"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/recordings/{{id}}"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/recordings/{{id}}/commands"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/recordings/{{id}}/evidence"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/sessions"),
                vec!["get"],
            ),
            (
                format!("{p}/namespaces/{{namespace}}/pods/{{name}}/sessions/{{session}}"),
                vec!["get", "delete"],
            ),
            (format!("{p}/nodedebugcontainers"), vec!["get"]),
            (format!("{p}/nodedebugcontainers/{{name}}"), vec!["get"]),
            (format!("{p}/nodes/{{name}}/debug"), vec!["get", "post"]),
            (
                format!("{p}/nodes/{{name}}/debug/{{container}}"),
                vec!["get", "post", "delete"],
            ),
            (format!("{p}/nodes/{{name}}/log"), vec!["get"]),
            (format!("{p}/poddebugcontainers"), vec!["get"]),
            (format!("{p}/poddebugcopies"), vec!["get"]),
            (format!("{p}/recordingkeys"), vec!["get"]),
            (format!("{p}/recordingkeys/{{name}}"), vec!["get"]),
        ];
        let got: Vec<(String, Vec<&str>)> = items
            .iter()
            .map(|i| {
                (
                    i.path.clone(),
                    i.operations.iter().map(|o| o.method.key()).collect(),
                )
            })
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn operation_ids_are_unique_and_kube_shaped() {
        let items = paths();
        let ids: Vec<&str> = items
            .iter()
            .flat_map(|i| i.operations.iter().map(|o| o.id.as_str()))
            .collect();
        let unique: BTreeSet<&str> = ids.iter().copied().collect();
        assert_eq!(ids.len(), unique.len(), "{ids:?}");
        for id in [
            "listPoddebugDevV1alpha1PodDebugContainerForAllNamespaces",
            "listPoddebugDevV1alpha1NamespacedPodDebugContainer",
            "readPoddebugDevV1alpha1NamespacedPodDebugContainer",
            "listPoddebugDevV1alpha1DebugProfile",
            "readPoddebugDevV1alpha1DebugProfile",
            "listPoddebugDevV1alpha1NamespacedPodDebug",
            "createPoddebugDevV1alpha1NamespacedPodDebug",
            "readPoddebugDevV1alpha1NamespacedPodDebugWithContainer",
            "createPoddebugDevV1alpha1NamespacedPodDebugWithContainer",
            "deletePoddebugDevV1alpha1NamespacedPodDebugWithContainer",
            "connectPoddebugDevV1alpha1GetNamespacedPodAttach",
            "connectPoddebugDevV1alpha1PostNamespacedPodAttach",
            "readPoddebugDevV1alpha1NamespacedPodLog",
        ] {
            assert!(unique.contains(id), "{id} missing from {ids:?}");
        }
        assert_eq!(tag(), "poddebugDev_v1alpha1");
    }

    #[test]
    fn query_parameters_per_operation() {
        let items = paths();
        let names = |path: &str, method: Method| -> Vec<&str> {
            find(&items, path)
                .operations
                .iter()
                .find(|o| o.method == method)
                .map(|o| o.query.iter().map(|q| q.name).collect())
                .unwrap_or_default()
        };
        let p = "/apis/poddebug.dev/v1alpha1";
        assert_eq!(
            names(&format!("{p}/poddebugcontainers"), Method::Get),
            [
                "fieldSelector",
                "labelSelector",
                "allowWatchBookmarks",
                "resourceVersion",
                "timeoutSeconds",
                "watch"
            ]
        );
        let debug = format!("{p}/namespaces/{{namespace}}/pods/{{name}}/debug");
        assert_eq!(names(&debug, Method::Post), ["timeoutSeconds", "wait"]);
        assert_eq!(
            names(&format!("{debug}/{{container}}"), Method::Delete),
            ["gracePeriodSeconds"]
        );
        let attach = format!("{p}/namespaces/{{namespace}}/pods/{{name}}/attach");
        for method in [Method::Get, Method::Post] {
            assert_eq!(
                names(&attach, method),
                ["container", "stderr", "stdin", "stdout", "tty"]
            );
        }
        assert_eq!(
            names(
                &format!("{p}/namespaces/{{namespace}}/pods/{{name}}/log"),
                Method::Get
            ),
            [
                "container",
                "follow",
                "sinceSeconds",
                "tailLines",
                "timestamps"
            ]
        );
        let item = find(&items, &format!("{debug}/{{container}}"));
        assert_eq!(
            item.params.iter().map(|p| p.name).collect::<Vec<_>>(),
            ["namespace", "name", "container"]
        );
    }

    #[test]
    fn actions_and_kinds() {
        for item in paths() {
            for op in &item.operations {
                let expected = match (op.method, item.path.ends_with("/attach")) {
                    (_, true) => "connect",
                    (Method::Post, _) => "post",
                    (Method::Delete, _) if item.path.ends_with('}') => "delete",
                    (Method::Delete, _) => "deletecollection",
                    (Method::Get, _)
                        if item.path.ends_with('}')
                            || item.path.ends_with("/log")
                            || item.path.ends_with("/recordings")
                            || item.path.ends_with("/commands")
                            || item.path.ends_with("/evidence") =>
                    {
                        "get"
                    }
                    (Method::Get, _) => "list",
                };
                assert_eq!(op.action, expected, "{} {}", item.path, op.id);
                if item.path.ends_with("/attach") {
                    assert_eq!(op.gvk, Gvk::core("PodAttachOptions"));
                } else if item.path.ends_with("/nodes/{name}/log") {
                    assert_eq!(op.gvk, Gvk::core("Node"));
                } else if item.path.ends_with("/log") {
                    assert_eq!(op.gvk, Gvk::core("Pod"));
                } else {
                    assert!(op.gvk.is_poddebug(), "{}", op.id);
                }
            }
        }
    }
}
