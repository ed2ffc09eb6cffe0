//! End-to-end support for poddebug: a throw-away PKI, a fake kube-apiserver that answers like the
//! real one (down to the Status texts of the live reference), a runner for the real
//! `poddebug-apiserver` binary, and an HTTPS test client.
//!
//! Everything listens on 127.0.0.1 only, every loop is bounded, and dropping a value stops what
//! it started.
#![warn(missing_docs)]

pub mod bench;
pub mod bodies;
pub mod browser;
pub mod capability;
pub mod channel;
pub mod client;
pub mod fake;
pub mod kubeconfig;
pub mod kubectl;
pub mod ocsf;
pub mod page_server;
pub mod pki;
pub mod playback;
pub mod server;
pub mod spdy;
pub mod synthetic;
pub mod user_proxy;
pub mod webhook;

pub use client::{
    ClientError, HttpVersion, StreamingResponse, TestClient, TestClientBuilder, UpgradeResponse,
};
pub use fake::{
    ADMIN_TOKEN, Attributes, ContainerState, ExecBehaviour, ExecRecord, FakeKube, Outage,
    PODDEBUG_TOKEN, PODDEBUG_USER, RequestRecord, SarRecord, UserInfo,
};
pub use pki::{Ca, CertKey, TempDir, TestPki};
pub use server::PodDebugServer;
pub use user_proxy::UserProxy;
