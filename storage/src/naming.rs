//! Which ephemeral container a create makes: the debug name (from the URL, or generated like
//! kubectl's `debugger-xxxxx`) and the ephemeral container's own name in the pod spec.
//!
//! Name reuse: ephemeral containers can never be removed, so once debug container `NAME` has
//! terminated, creating `NAME` again adds a new ephemeral container `NAME-xxxxx` that carries the
//! debug name in an env var (`poddebug_types::convert::DEBUG_NAME_ENV`); reads then show the newest
//! one. While the newest `NAME` has not terminated, the create is refused with 409 AlreadyExists,
//! unless it can truly never start (`InvalidImageName`, or a start the runtime already failed,
//! see `state`): a container that may still start (`ImagePullBackOff`, `ErrImagePull`,
//! `CreateContainerConfigError`, …) keeps its name, or it could start later hidden behind the
//! new one, out of reach of the API.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use poddebug_types::convert::{debug_containers_of, newest_for};
use poddebug_types::names::generate_debug_name;
use poddebug_types::{ApiError, GROUP};
use rand::Rng;

use crate::policy::RESOURCE;
use crate::state::{EcState, ec_state};

use poddebug_types::names::{DEBUG_NAME_ALPHABET as ALPHABET, DEBUG_NAME_SUFFIX_LEN as SUFFIX_LEN};
/// Longest container name (a DNS label).
const MAX_NAME: usize = 63;
/// Attempts at a random name before giving up (27^5 names: only a pathological pod gets here).
const MAX_ATTEMPTS: usize = 100;

/// The names a create uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResolvedName {
    /// The debug container's name in the API (`metadata.name`).
    pub(crate) debug_name: String,
    /// The ephemeral container's name in the pod spec.
    pub(crate) ec_name: String,
}

/// A random suffix of kubectl's alphabet.
fn suffix(rng: &mut impl Rng) -> String {
    (0..SUFFIX_LEN)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// Every container name of the pod: containers, init containers and ephemeral containers.
pub(crate) fn taken_names(pod: &Pod) -> BTreeSet<String> {
    let Some(spec) = pod.spec.as_ref() else {
        return BTreeSet::new();
    };
    let containers = spec.containers.iter().map(|c| c.name.clone());
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.clone());
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|c| c.name.clone());
    containers.chain(init).chain(ephemeral).collect()
}

/// `debug_name` cut to leave room for `-xxxxx`, plus a random suffix, clashing with nothing in
/// `taken`. The result is a DNS label of at most 63 characters when `debug_name` is one.
fn fresh_ec_name(debug_name: &str, taken: &BTreeSet<String>, rng: &mut impl Rng) -> Option<String> {
    let room = MAX_NAME - SUFFIX_LEN - 1;
    // Names are DNS labels (ASCII); cut on a character boundary all the same.
    let mut cut = debug_name.len().min(room);
    while !debug_name.is_char_boundary(cut) {
        cut -= 1;
    }
    let base = &debug_name[..cut];
    (0..MAX_ATTEMPTS)
        .map(|_| format!("{base}-{}", suffix(rng)))
        .find(|n| !taken.contains(n))
}

/// 409 AlreadyExists for debug name `name` whose newest container is in `state`; when it waits
/// on something it may get past, the message says so.
fn in_use(name: &str, state: &EcState) -> ApiError {
    match state {
        EcState::Waiting {
            reason: Some(r), ..
        } if !r.is_empty() && r != "ContainerCreating" => ApiError::already_exists_because(
            RESOURCE,
            GROUP,
            name,
            format!(
                "it has not started ({}), and the kubelet keeps retrying, so it may still start",
                state.describe()
            ),
        ),
        _ => ApiError::already_exists(RESOURCE, GROUP, name),
    }
}

/// Decide the names of a create on `pod`: `requested` from the URL, or a generated one.
pub(crate) fn resolve(
    pod: &Pod,
    requested: Option<&str>,
    rng: &mut impl Rng,
) -> Result<ResolvedName, ApiError> {
    let taken = taken_names(pod);
    let exhausted = || ApiError::Internal("could not find a free ephemeral container name".into());
    let Some(name) = requested else {
        let debug_names: BTreeSet<String> = debug_containers_of(pod)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let generated = generate_debug_name(|n| taken.contains(n) || debug_names.contains(n), rng)?;
        return Ok(ResolvedName {
            debug_name: generated.clone(),
            ec_name: generated,
        });
    };
    match newest_for(pod, name) {
        // Running, starting, retrying, or not reported yet: the name is in use. A container
        // that can never start frees its name like a terminated one.
        Some(ec) if !ec_state(pod, &ec.name).is_terminated() => {
            let state = ec_state(pod, &ec.name);
            if state.never_starts() {
                return Ok(ResolvedName {
                    debug_name: name.to_owned(),
                    ec_name: fresh_ec_name(name, &taken, rng).ok_or_else(exhausted)?,
                });
            }
            Err(in_use(name, &state))
        }
        Some(_) => Ok(ResolvedName {
            debug_name: name.to_owned(),
            ec_name: fresh_ec_name(name, &taken, rng).ok_or_else(exhausted)?,
        }),
        // An ephemeral container of another debug name holds the name: use a fresh one. A
        // clash with a regular or init container is left to validation (422 Duplicate value),
        // as kube-apiserver answers it.
        None if crate::state::ephemeral_container(pod, name).is_some() => Ok(ResolvedName {
            debug_name: name.to_owned(),
            ec_name: fresh_ec_name(name, &taken, rng).ok_or_else(exhausted)?,
        }),
        None => Ok(ResolvedName {
            debug_name: name.to_owned(),
            ec_name: name.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testutil::pod;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn rng() -> StdRng {
        StdRng::seed_from_u64(7)
    }

    fn is_suffixed(name: &str, base: &str) -> bool {
        name.len() == base.len() + 6
            && name.starts_with(base)
            && name.as_bytes()[base.len()] == b'-'
            && name[base.len() + 1..]
                .bytes()
                .all(|b| ALPHABET.contains(&b))
    }

    #[test]
    fn new_name_is_used_as_is() {
        let p = pod("web", &[]);
        let r = resolve(&p, Some("dbg"), &mut rng()).expect("free name");
        assert_eq!(
            r,
            ResolvedName {
                debug_name: "dbg".into(),
                ec_name: "dbg".into()
            }
        );
    }

    #[test]
    fn generated_names_look_like_kubectl() {
        let p = pod("web", &[("debugger-aaaaa", None, "running")]);
        for _ in 0..50 {
            let r = resolve(&p, None, &mut rand::rng()).expect("generated");
            assert!(is_suffixed(&r.debug_name, "debugger"), "{}", r.debug_name);
            assert_eq!(r.debug_name, r.ec_name);
            assert_ne!(r.ec_name, "debugger-aaaaa");
        }
    }

    #[test]
    fn running_or_waiting_name_is_already_exists() {
        for state in ["running", "waiting:ContainerCreating", "none"] {
            let p = pod("web", &[("dbg", None, state)]);
            let err = resolve(&p, Some("dbg"), &mut rng()).expect_err(state);
            assert_eq!(err.code(), 409);
            assert_eq!(err.reason(), "AlreadyExists");
            assert_eq!(
                err.message(),
                "pods/debug.poddebug.dev \"dbg\" already exists"
            );
        }
    }

    #[test]
    fn a_container_that_may_still_start_keeps_its_name() {
        // The kubelet retries these: the old container may start later, hidden behind a new one.
        for reason in [
            "ErrImagePull",
            "ImagePullBackOff",
            "RegistryUnavailable",
            "CreateContainerConfigError",
            "CreateContainerError",
            "ErrImageNeverPull",
        ] {
            let p = pod("web", &[("dbg", None, &format!("waiting:{reason}"))]);
            let err = resolve(&p, Some("dbg"), &mut rng()).expect_err(reason);
            assert_eq!((err.code(), err.reason()), (409, "AlreadyExists"));
            assert_eq!(
                err.message(),
                format!(
                    "pods/debug.poddebug.dev \"dbg\" already exists: it has not started ({reason}: \
                     {reason} happened), and the kubelet keeps retrying, so it may still start"
                )
            );
        }
    }

    #[test]
    fn terminated_name_is_reused_with_a_fresh_ec_name() {
        // A container that can truly never start frees its name too.
        for state in [
            "terminated",
            "waiting:InvalidImageName",
            "waiting:RunContainerError",
            "waiting:PreStartHookError",
        ] {
            let p = pod("web", &[("dbg", None, state)]);
            let r = resolve(&p, Some("dbg"), &mut rng()).expect(state);
            assert_eq!(r.debug_name, "dbg");
            assert!(is_suffixed(&r.ec_name, "dbg"), "{}", r.ec_name);
        }
    }

    #[test]
    fn reuse_looks_at_the_newest_only() {
        // dbg was reused once already; its newest incarnation runs.
        let p = pod(
            "web",
            &[
                ("dbg", None, "terminated"),
                ("dbg-bcdfg", Some("dbg"), "running"),
            ],
        );
        assert_eq!(
            resolve(&p, Some("dbg"), &mut rng())
                .expect_err("running")
                .code(),
            409
        );
        // ... and once it terminated too, a third one is made.
        let p = pod(
            "web",
            &[
                ("dbg", None, "terminated"),
                ("dbg-bcdfg", Some("dbg"), "terminated"),
            ],
        );
        let r = resolve(&p, Some("dbg"), &mut rng()).expect("reuse again");
        assert!(is_suffixed(&r.ec_name, "dbg"));
        assert_ne!(r.ec_name, "dbg-bcdfg");
    }

    #[test]
    fn long_names_stay_dns_labels() {
        let long = "a".repeat(63);
        let p = pod("web", &[(long.as_str(), None, "terminated")]);
        let r = resolve(&p, Some(&long), &mut rng()).expect("reuse");
        assert_eq!(r.ec_name.len(), 63);
        assert!(is_suffixed(&r.ec_name, &"a".repeat(57)));
    }

    #[test]
    fn ec_name_held_by_another_debug_name_gets_a_fresh_one() {
        // "dbg-bcdfg" is an ephemeral container whose debug name is "dbg".
        let p = pod(
            "web",
            &[
                ("dbg", None, "terminated"),
                ("dbg-bcdfg", Some("dbg"), "running"),
            ],
        );
        let r = resolve(&p, Some("dbg-bcdfg"), &mut rng()).expect("fresh");
        assert_eq!(r.debug_name, "dbg-bcdfg");
        assert!(is_suffixed(&r.ec_name, "dbg-bcdfg"));
    }

    #[test]
    fn clash_with_a_regular_container_is_left_to_validation() {
        let p = pod("web", &[]);
        let r = resolve(&p, Some("app"), &mut rng()).expect("validation decides");
        assert_eq!(r.ec_name, "app");
    }

    #[test]
    fn taken_names_cover_every_kind() {
        let p = pod("web", &[("x", None, "running")]);
        let t = taken_names(&p);
        assert!(t.contains("app") && t.contains("x"));
    }
}
