//! The router: every path the server answers, in one place.

use axum::Router;
use axum::middleware;
use axum::routing::get;

use crate::filters::handler_chain;
use crate::handlers::{
    admission, attach, copies, copy_collection, debug, discovery, health, list, log, nodes,
    not_found, portal, profiles, recording_keys, recordings, requests, sessions,
};
use crate::state::AppState;

/// Prefix of every resource path.
const GV: &str = "/apis/poddebug.dev/v1alpha1";

/// The whole application: routes behind the handler chain (authn, authz, limits, logging).
pub fn app(state: AppState) -> Router {
    let ns_pods = format!("{GV}/namespaces/{{namespace}}/pods/{{pod}}");
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/livez", get(health::livez))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .route(admission::PATH, axum::routing::post(admission::connect))
        .route("/apis", get(discovery::apis))
        .route("/apis/poddebug.dev", get(discovery::group))
        .route(GV, get(discovery::resources))
        .route("/openapi/v2", get(discovery::openapi_v2))
        .route("/openapi/v3", get(discovery::openapi_v3_index))
        .route(
            "/openapi/v3/apis/poddebug.dev/v1alpha1",
            get(discovery::openapi_v3_group_version),
        )
        .route(
            &format!("{ns_pods}/debug"),
            get(debug::list_in_pod).post(debug::create_generated),
        )
        .route(
            &format!("{ns_pods}/debug/{{name}}"),
            get(debug::get)
                .post(debug::create_named)
                .delete(debug::delete),
        )
        .route(
            &format!("{ns_pods}/attach"),
            get(attach::attach).post(attach::attach),
        )
        .route(&format!("{ns_pods}/log"), get(log::log))
        .route(&format!("{ns_pods}/sessions"), get(sessions::list_in_pod))
        .route(
            &format!("{ns_pods}/sessions/{{id}}"),
            get(sessions::get_in_pod).delete(sessions::delete),
        )
        .route(
            &format!("{GV}/debugsessions"),
            get(sessions::all_namespaces),
        )
        .route(
            &format!("{GV}/namespaces/{{namespace}}/debugsessions"),
            get(sessions::in_namespace),
        )
        .route(
            &format!("{GV}/namespaces/{{namespace}}/debugsessions/{{id}}"),
            get(sessions::get_in_namespace),
        )
        .route(
            &format!("{ns_pods}/copy"),
            axum::routing::post(copies::create),
        )
        .route(&format!("{ns_pods}/copies"), get(copies::list))
        .route(
            &format!("{ns_pods}/copies/{{name}}"),
            get(copies::get).delete(copies::delete),
        )
        .route(
            &format!("{GV}/poddebugcopies"),
            get(copy_collection::all_namespaces),
        )
        .route(
            &format!("{GV}/namespaces/{{namespace}}/poddebugcopies"),
            get(copy_collection::in_namespace),
        )
        .route(
            &format!("{GV}/namespaces/{{namespace}}/poddebugcopies/{{name}}"),
            get(copy_collection::get_one),
        )
        .route(
            &format!("{GV}/nodes/{{node}}/debug"),
            get(nodes::list_in_node).post(nodes::create_generated),
        )
        .route(
            &format!("{GV}/nodes/{{node}}/debug/{{name}}"),
            get(nodes::get)
                .post(nodes::create_named)
                .delete(nodes::delete),
        )
        .route(
            &format!("{GV}/nodes/{{node}}/debug/{{name}}/attach"),
            get(nodes::attach).post(nodes::attach),
        )
        .route(
            &format!("{GV}/nodes/{{node}}/debug/{{name}}/log"),
            get(nodes::log),
        )
        .route(
            &format!("{GV}/nodes/{{node}}/log"),
            get(nodes::log_by_query),
        )
        .route(&format!("{GV}/nodedebugcontainers"), get(nodes::all))
        .route(
            &format!("{GV}/nodedebugcontainers/{{name}}"),
            get(nodes::get_one),
        )
        .route(&format!("{ns_pods}/recordings"), get(recordings::list))
        .route(
            &format!("{ns_pods}/recordings/{{id}}"),
            get(recordings::get),
        )
        .route(
            &format!("{ns_pods}/recordings/{{id}}/commands"),
            get(recordings::commands),
        )
        .route(
            &format!("{ns_pods}/recordings/{{id}}/evidence"),
            get(recordings::evidence),
        )
        .route(&format!("{GV}/recordingkeys"), get(recording_keys::list))
        .route(
            &format!("{GV}/recordingkeys/{{id}}"),
            get(recording_keys::get),
        )
        .route(
            &format!("{GV}/debugrecordings"),
            get(recordings::all_namespaces),
        )
        .route(
            &format!("{GV}/namespaces/{{namespace}}/debugrecordings"),
            get(recordings::in_namespace),
        )
        .route(
            &format!("{GV}/namespaces/{{namespace}}/debugrecordings/{{id}}"),
            get(recordings::get_in_namespace),
        )
        .route(
            &format!("{GV}/poddebugcontainers"),
            get(list::all_namespaces),
        )
        .route(
            &format!("{GV}/namespaces/{{namespace}}/poddebugcontainers"),
            get(list::in_namespace),
        )
        .route(
            &format!("{GV}/namespaces/{{namespace}}/poddebugcontainers/{{name}}"),
            get(list::get_one),
        )
        .route(
            &format!("{GV}/debugrequests"),
            get(requests::all_namespaces),
        )
        .route(
            &format!("{GV}/namespaces/{{namespace}}/debugrequests"),
            get(requests::in_namespace)
                .post(requests::create)
                .delete(requests::delete_collection),
        )
        .route(
            &format!("{GV}/namespaces/{{namespace}}/debugrequests/{{name}}"),
            get(requests::get).delete(requests::delete),
        )
        .route(
            &format!("{GV}/namespaces/{{namespace}}/debugrequests/{{name}}/approval"),
            axum::routing::post(requests::approval),
        )
        .route(&format!("{GV}/debugprofiles"), get(profiles::list))
        .route(&format!("{GV}/debugprofiles/{{name}}"), get(profiles::get))
        .route(&format!("{GV}/portal"), get(portal::redirect))
        .route(&format!("{GV}/portal/"), get(portal::index))
        .route(&format!("{GV}/portal/{{file}}"), get(portal::asset))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), handler_chain))
        .with_state(state)
}

async fn method_not_allowed(method: http::Method) -> crate::error::Error {
    crate::error::Error::Api(poddebug_types::ApiError::MethodNotAllowed(format!(
        "the server does not allow this method on the requested resource ({method})"
    )))
}
