//! API types of `poddebug.dev/v1alpha1`, strict decoding, the ephemeral-container rules of
//! kube-apiserver, debug profiles, and the Kubernetes `Status` error model.
//!
//! This crate has no async runtime and no network access: everything here is a pure function of
//! its inputs, so the other crates (and fuzzers) can call it freely.
#![warn(missing_docs)]
// Tests may panic on purpose; the lint guards the code that runs in the server.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod api;
pub mod convert;
pub mod copy;
pub mod decode;
pub mod duration;
pub mod evidence;
pub mod field;
pub mod moderated;
pub mod names;
pub mod node;
pub mod only_way_in;
pub mod pass_through;
pub mod pod_security;
pub mod privilege;
pub mod profile;
pub mod reach;
pub mod recording;
pub mod request;
pub mod resource;
pub mod session;
pub mod status;
pub mod stoppable;
pub mod validation;

pub use api::{
    DebugPhase, DebugProfile, DebugProfileList, PodDebugContainer, PodDebugContainerList,
    PodDebugContainerStatus, StopRequest,
};
pub use field::{ErrorList, FieldError, FieldErrorKind, FieldValue};
pub use profile::Profile;
pub use recording::{
    KIND_RECORDING, KIND_RECORDING_COMMAND_LIST, KIND_RECORDING_LIST, Recording, RecordingCommand,
    RecordingCommandList, RecordingList, RecordingMatch, RecordingRecord, RecordingSpec,
    RecordingStatus,
};
pub use session::{
    DebugSession, DebugSessionList, DebugSessionSpec, DebugSessionStatus, KIND_DEBUG_SESSION,
    KIND_DEBUG_SESSION_LIST, Participant, SessionMode,
};
pub use status::ApiError;

/// The API group served by poddebug.
pub const GROUP: &str = "poddebug.dev";
/// The only version of the group.
pub const VERSION: &str = "v1alpha1";
/// `GROUP/VERSION`, the `apiVersion` of every object of the group.
pub const API_VERSION: &str = "poddebug.dev/v1alpha1";
