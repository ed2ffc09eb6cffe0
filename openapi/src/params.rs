//! Query and path parameters of the endpoints, with the descriptions the OpenAPI documents show.
//!
//! Descriptions of the parameters kube-apiserver also has follow its wording; the ones specific
//! to poddebug say what this server does with them.

/// JSON type of a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamType {
    /// `string`.
    String,
    /// `boolean`.
    Boolean,
    /// `integer`.
    Integer,
    /// `number`.
    Number,
}

impl ParamType {
    /// The OpenAPI `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Boolean => "boolean",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
        }
    }
}

/// One parameter of an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    /// Name in the query string or path template.
    pub name: &'static str,
    /// JSON type.
    pub ty: ParamType,
    /// What it does.
    pub description: &'static str,
}

const fn param(name: &'static str, ty: ParamType, description: &'static str) -> Param {
    Param {
        name,
        ty,
        description,
    }
}

/// `{namespace}` of a namespaced path.
pub const NAMESPACE: Param = param(
    "namespace",
    ParamType::String,
    "object name and auth scope, such as for teams and projects",
);

/// `labelSelector` of a list.
pub const LABEL_SELECTOR: Param = param(
    "labelSelector",
    ParamType::String,
    "A selector to restrict the list of returned objects by the labels of their pods. Defaults to everything.",
);

/// `fieldSelector` of a list.
pub const FIELD_SELECTOR: Param = param(
    "fieldSelector",
    ParamType::String,
    "A selector to restrict the list of returned objects by the fields of their pods. Defaults to everything.",
);

/// `watch` of a list.
pub const WATCH: Param = param(
    "watch",
    ParamType::Boolean,
    "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.",
);

/// `resourceVersion` of a watch.
pub const RESOURCE_VERSION: Param = param(
    "resourceVersion",
    ParamType::String,
    "With watch, send only the changes after this resourceVersion (the resourceVersion of the pod list the objects were read from). Without watch, it is ignored.",
);

/// `allowWatchBookmarks` of a watch.
pub const ALLOW_WATCH_BOOKMARKS: Param = param(
    "allowWatchBookmarks",
    ParamType::Boolean,
    "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion. Clients should not assume bookmarks are returned at any specific interval, nor may they assume the server will send any BOOKMARK event during a session. If this is not a watch, this field is ignored.",
);

/// `timeoutSeconds` of a list or watch.
pub const LIST_TIMEOUT_SECONDS: Param = param(
    "timeoutSeconds",
    ParamType::Integer,
    "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.",
);

/// `wait` of a create.
pub const WAIT: Param = param(
    "wait",
    ParamType::Boolean,
    "If true, answer once the debug container runs or has terminated (or timeoutSeconds passed) instead of as soon as it was added to the pod.",
);

/// `timeoutSeconds` of a create.
pub const WAIT_TIMEOUT_SECONDS: Param = param(
    "timeoutSeconds",
    ParamType::Integer,
    "With wait=true, how long to wait for the debug container to run or terminate before answering with its current state.",
);

/// `gracePeriodSeconds` of a delete.
pub const GRACE_PERIOD_SECONDS: Param = param(
    "gracePeriodSeconds",
    ParamType::Integer,
    "Seconds between SIGTERM and SIGKILL when the processes of the debug container are stopped. The entry stays in the pod's spec: ephemeral containers cannot be removed.",
);

/// Query parameters of reading one recording: the range of session time a player needs.
pub const RECORDING_RANGE: &[Param] = &[
    param(
        "start",
        ParamType::Number,
        "Session time in seconds (decimal) to play from: the answer is the asciicast header, then the events of the part of the recording that holds this time, from that part's start. Without start and end, the whole recording.",
    ),
    param(
        "end",
        ParamType::Number,
        "Session time in seconds (decimal) to play to: events after it are left out. Not before start.",
    ),
];

/// Query parameters of `pods/attach`.
pub const ATTACH_OPTIONS: &[Param] = &[
    param(
        "container",
        ParamType::String,
        "The debug (ephemeral) container to attach to. Required; it must be a debug container of the pod.",
    ),
    param(
        "stderr",
        ParamType::Boolean,
        "Stderr if true indicates that stderr is to be redirected for the attach call. Defaults to true.",
    ),
    param(
        "stdin",
        ParamType::Boolean,
        "Stdin if true, redirects the standard input stream of the pod for this call. Defaults to false.",
    ),
    param(
        "stdout",
        ParamType::Boolean,
        "Stdout if true indicates that stdout is to be redirected for the attach call. Defaults to true.",
    ),
    param(
        "tty",
        ParamType::Boolean,
        "TTY if true indicates that a tty will be allocated for the attach call. This is passed through the container runtime so the tty is allocated on the worker node by the container runtime. Defaults to false.",
    ),
];

/// Query parameters of `pods/log`.
pub const LOG_OPTIONS: &[Param] = &[
    param(
        "container",
        ParamType::String,
        "The debug (ephemeral) container for which to stream logs. Required; it must be a debug container of the pod.",
    ),
    param(
        "follow",
        ParamType::Boolean,
        "Follow the log stream of the container. Defaults to false.",
    ),
    param(
        "sinceSeconds",
        ParamType::Integer,
        "A relative time in seconds before the current time from which to show logs. If this value precedes the time the container was started, only logs since the container start will be returned. If this value is in the future, no logs will be returned.",
    ),
    param(
        "tailLines",
        ParamType::Integer,
        "If set, the number of lines from the end of the logs to show. If not specified, logs are shown from the creation of the container or sinceSeconds.",
    ),
    param(
        "timestamps",
        ParamType::Boolean,
        "If true, add an RFC3339 or RFC3339Nano timestamp at the beginning of every line of log output. Defaults to false.",
    ),
];
