//! A Rust client for the `poddebug.dev/v1alpha1` API: add debug (ephemeral) containers to
//! running pods, read and watch them, attach to their console, read their output, stop them.
//!
//! Built on kube-rs: the configuration is kube-rs's (every kubeconfig auth kind, exec plugins,
//! in-cluster), requests go through kube-apiserver's aggregation layer like kubectl's, and the
//! objects are the server's own types from [`poddebug_types`].
//!
//! [`PodDebugContainer`] implements `kube::Resource` as the `poddebugcontainers` collection,
//! so `kube::Api<PodDebugContainer>` and kube-runtime's `watcher`, `reflector` and
//! `await_condition` work on it directly ([`DebugContainers::api`]); there it is named
//! `POD.NAME`, under its pod (`create`, `get`, `stop`, `attach`) just `NAME`.
//!
//! Just-in-time access: [`DebugRequests`] files a request for a gated profile with a reason,
//! waits for someone else's decision, and reviews (approves, denies, revokes) others'; a debug
//! container, copy or node debug container made under an approved request names it in
//! `debugRequest`.
//!
//! ```no_run
//! use poddebug_client::{AttachParams, CreateParams, DebugContainers, PodDebugContainer};
//!
//! # async fn run() -> poddebug_client::Result<()> {
//! let client = kube::Client::try_default().await?;
//! let debug = DebugContainers::new(client, "default");
//! let mut spec = PodDebugContainer::default();
//! spec.metadata.name = Some("dbg".into());
//! spec.container.image = Some("busybox:1.36".into());
//! spec.container.command = Some(vec!["sh".into(), "-c".into(), "exit 7".into()]);
//! spec.target_container_name = Some("app".into());
//! debug.create("web", &spec, &CreateParams::default()).await?;
//! debug
//!     .wait_started("web", "dbg", std::time::Duration::from_secs(60), |_| {})
//!     .await?;
//! let session = debug.attach("web", "dbg", &AttachParams::default()).await?;
//! println!("{:?}", session.join().await?);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod attach;
mod config;
mod copies;
mod debug_containers;
mod error;
mod nodes;
mod params;
mod recordings;
mod requests;
mod sessions;
mod streams;

pub use attach::{
    AttachOutcome, AttachedDebugContainer, DebugOutput, DebugStdin, Detacher, Resizer,
    exit_code_of, outcome_of,
};
pub use config::{ConnectOptions, Warnings, config, connect, warning_text};
pub use copies::{Copies, container_status as copy_container_status};
pub use debug_containers::{DebugContainers, waiting_reason};
pub use error::{Error, Result, Status};
pub use nodes::{NodeDebugContainers, outcome_of as node_outcome_of};
pub use params::{AttachParams, CreateParams, LogParams};
pub use recordings::{RecordingRange, Recordings};
pub use requests::DebugRequests;
pub use sessions::Sessions;

pub use kube::api::{ListParams, WatchEvent, WatchParams};
/// kube-runtime's watcher, as [`DebugContainers::watch`] uses it (`watcher::Config`,
/// `watcher::Event`).
pub use kube::runtime::watcher;
/// The API types, as the server defines them.
pub use poddebug_types as types;
pub use poddebug_types::request::{DebugRequest, DebugRequestList, RequestPhase};
pub use poddebug_types::{
    DebugPhase, DebugProfile, DebugProfileList, DebugSession, DebugSessionList, PodDebugContainer,
    PodDebugContainerList, PodDebugContainerStatus, SessionMode,
};
