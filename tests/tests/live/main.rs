//! The live-cluster suite: a real kube-apiserver with its aggregator, a real kubelet and the real
//! kubectl, with poddebug registered (out of the cluster through `manifests/local/register.sh`,
//! or deployed by `manifests/`). Ignored by default; run with
//!
//! ```sh
//! PODDEBUG_LIVE=1 KUBECONFIG=... cargo test -p poddebug-tests --test live -- --ignored
//! ```
//!
//! - `PODDEBUG_LIVE=1` (CI) makes a missing cluster or registration a failure; without it the
//!   suite skips when `KUBECONFIG` is unset.
//! - `PODDEBUG_LIVE_IMPERSONATE=1` says the server runs with `--impersonate` (the tests whose
//!   outcome depends on it assert the matching one).
//! - `PODDEBUG_LIVE_SERVER=https://HOST:PORT` is where the server itself listens, for the tests
//!   that bypass the aggregator; by default the ExternalName Service the APIService points at.
//! - `PODDEBUG_LIVE_PYTHON` is a Python with the official Kubernetes client (PyPI
//!   `kubernetes`), for `origins::` (.ci/live makes one in a venv).
//! - The server is expected to run with
//!   `--allowed-images=busybox:*,docker.io/library/busybox:*,registry.k8s.io/pause:*` (the
//!   images the test cluster has) and `--approval-profiles=sysadmin:1,netadmin:1` (debug
//!   requests, `requests::`), as CI runs it.
//!
//! Every test makes its own namespace (with a running pod `web`, container `app`) and deletes
//! it at the end; every wait is a poll with a deadline. One module per area.

mod support;

mod authz;
mod copies;
mod crud;
mod deployment;
mod discovery;
mod events;
mod faults;
mod forgery;
mod hardening;
mod impersonation;
mod lists;
mod naming;
mod nodes;
mod only_way_in;
mod origins;
mod portal;
mod reach;
mod recordings;
mod requests;
mod rotation;
mod sessions;
mod stop;
mod streams;
mod troubleshooting;
mod ttl;
mod validation;
mod wait;
mod watch;
