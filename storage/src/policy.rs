//! The server's create policy: `--allowed-images` (glob patterns) and
//! `--max-debug-containers-per-pod`. Both refuse with 403 Forbidden naming the rule.

use poddebug_types::{ApiError, GROUP};

use crate::Policy;

/// The resource every debug-container error names (`pods/debug.poddebug.dev`).
pub(crate) const RESOURCE: &str = "pods/debug";

/// Whether `text` matches `pattern`, where `*` matches any run of characters (`/` and `:`
/// included, possibly empty) and every other character matches itself. The image string is
/// compared as written in the request, without normalisation: `busybox` does not match
/// `docker.io/library/*`, and `busybox*` also matches `busybox.evil.example/x`, so patterns should
/// end with `:*` or `@*` where a tag or digest is meant.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0usize, 0usize);
    // Position of the last `*` seen in the pattern, and the text position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                // Let the last `*` swallow one more character and retry from there.
                Some((spi, sti)) => {
                    pi = spi + 1;
                    ti = sti + 1;
                    star = Some((spi, sti + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Refuse an image that matches none of `--allowed-images` (an empty list allows every image).
pub(crate) fn check_image(policy: &Policy, pod: &str, image: &str) -> Result<(), ApiError> {
    check_image_for(RESOURCE, policy, pod, image)
}

/// [`check_image`] for a request on `resource` (`pods/copy`, `nodes/debug`).
pub(crate) fn check_image_for(
    resource: &str,
    policy: &Policy,
    pod: &str,
    image: &str,
) -> Result<(), ApiError> {
    if policy.allowed_images.is_empty()
        || policy.allowed_images.iter().any(|p| glob_match(p, image))
    {
        return Ok(());
    }
    let patterns = policy
        .allowed_images
        .iter()
        .map(|p| format!("{p:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    Err(ApiError::forbidden(
        resource,
        GROUP,
        pod,
        format!(
            "image {image:?} is not allowed by the server's --allowed-images policy \
             (allowed patterns: {patterns})"
        ),
    ))
}

/// Refuse a create once the pod carries `--max-debug-containers-per-pod` ephemeral containers
/// (all of them count, whoever added them; 0 = no limit).
pub(crate) fn check_count(policy: &Policy, pod: &str, existing: usize) -> Result<(), ApiError> {
    let max = policy.max_debug_containers_per_pod;
    if max == 0 || existing < max {
        return Ok(());
    }
    Err(ApiError::forbidden(
        RESOURCE,
        GROUP,
        pod,
        format!(
            "the pod already has {existing} ephemeral containers and the server's \
             --max-debug-containers-per-pod policy allows at most {max}"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use poddebug_types::Profile;

    fn policy(allowed: &[&str], max: usize) -> Policy {
        Policy {
            allowed_images: allowed.iter().map(|s| (*s).to_owned()).collect(),
            default_image: "busybox:1.36".to_owned(),
            default_profile: Profile::General,
            max_debug_containers_per_pod: max,
            default_target: crate::DefaultTarget::None,
        }
    }

    #[test]
    fn glob_literals_and_stars() {
        assert!(glob_match("busybox", "busybox"));
        assert!(!glob_match("busybox", "busybox:1.36"));
        assert!(glob_match("busybox:*", "busybox:1.36"));
        assert!(!glob_match("busybox:*", "busybox"));
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "anything/at:all"));
        assert!(glob_match(
            "registry.example/debug/*",
            "registry.example/debug/tools:v1"
        ));
        assert!(glob_match(
            "registry.example/debug/*",
            "registry.example/debug/a/b@sha256:00"
        ));
        assert!(!glob_match(
            "registry.example/debug/*",
            "registry.example/other/tools"
        ));
        assert!(glob_match(
            "*/netshoot:*",
            "docker.io/nicolaka/netshoot:v0.13"
        ));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(glob_match("a*b*c", "abc"));
        assert!(!glob_match("a*b*c", "aXXcYYb"));
        assert!(glob_match("a**", "a"));
        assert!(!glob_match("", "a"));
        assert!(glob_match("", ""));
        // Backtracking: the first `b` is not the right one.
        assert!(glob_match("*bc", "abbc"));
        assert!(glob_match("*b*bc", "abxbbc"));
        assert!(!glob_match("*.example/*", "example/x"));
    }

    #[test]
    fn glob_is_not_a_regex() {
        assert!(!glob_match("busybox.*", "busyboxX1"));
        assert!(glob_match("busybox.*", "busybox.1"));
        assert!(!glob_match("b?sybox", "busybox"));
    }

    #[test]
    fn empty_allow_list_allows_all() {
        assert!(check_image(&policy(&[], 0), "web", "anything").is_ok());
    }

    #[test]
    fn refused_image_names_the_rule() {
        let err = check_image(
            &policy(&["busybox:*", "registry.example/*"], 0),
            "web",
            "alpine",
        )
        .expect_err("alpine matches no pattern");
        assert_eq!(err.code(), 403);
        assert_eq!(
            err.message(),
            "pods/debug.poddebug.dev \"web\" is forbidden: image \"alpine\" is not allowed by the \
             server's --allowed-images policy (allowed patterns: \"busybox:*\", \"registry.example/*\")"
        );
        assert!(
            check_image(
                &policy(&["busybox:*", "registry.example/*"], 0),
                "web",
                "busybox:1"
            )
            .is_ok()
        );
    }

    #[test]
    fn max_per_pod() {
        let p = policy(&[], 2);
        assert!(check_count(&p, "web", 0).is_ok());
        assert!(check_count(&p, "web", 1).is_ok());
        let err = check_count(&p, "web", 2).expect_err("limit reached");
        assert_eq!(err.code(), 403);
        assert!(
            err.message().contains("--max-debug-containers-per-pod"),
            "{}",
            err.message()
        );
        assert!(err.message().contains("at most 2"), "{}", err.message());
        assert!(check_count(&policy(&[], 0), "web", 1000).is_ok());
    }
}
