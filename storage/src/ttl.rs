//! Time limits: the deadline a create gives its debug container.
//!
//! The deadline is `ttlSeconds` (else the server's default) after the create, written into
//! the ephemeral container's own spec as [`EXPIRES_AT_ENV`](poddebug_types::convert::EXPIRES_AT_ENV).
//! Nothing else is stored: the expiry loop finds it again on the pod (see [`crate::expiry`]).

use std::time::Duration;

use poddebug_types::api::KIND_POD_DEBUG_CONTAINER;
use poddebug_types::{ApiError, ErrorList, FieldError, GROUP};

/// The server's time-limit policy (`--default-debug-ttl`, `--max-debug-ttl`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TtlPolicy {
    /// Time limit of a create that names none; `None` = no limit.
    pub default: Option<Duration>,
    /// Largest time limit a create may ask for; `None` = no maximum. With a maximum, a create
    /// always gets a limit: one without `ttlSeconds` gets the default cut to the maximum.
    pub max: Option<Duration>,
}

/// The deadline of a debug container created at `now` with `ttl_seconds` (the request's field,
/// already known not to be negative; `0` = no limit), or a 422 on `ttlSeconds` when it is above
/// the maximum (or asks for no limit while there is a maximum).
pub(crate) fn deadline(
    policy: &TtlPolicy,
    ttl_seconds: Option<i64>,
    name: &str,
    now: jiff::Timestamp,
) -> Result<Option<jiff::Timestamp>, ApiError> {
    deadline_of(KIND_POD_DEBUG_CONTAINER, policy, ttl_seconds, name, now)
}

/// [`deadline`] of an object of kind `kind` (the kind its 422 names).
pub(crate) fn deadline_of(
    kind: &str,
    policy: &TtlPolicy,
    ttl_seconds: Option<i64>,
    name: &str,
    now: jiff::Timestamp,
) -> Result<Option<jiff::Timestamp>, ApiError> {
    let invalid = |value: i64, detail: String| {
        let mut errs = ErrorList::new();
        errs.push(FieldError::invalid("ttlSeconds", value, detail));
        ApiError::invalid(GROUP, kind, name, errs)
    };
    let ttl = match ttl_seconds {
        Some(s) if s < 0 => {
            return Err(invalid(s, "must be greater than or equal to 0".to_owned()));
        }
        Some(0) => None,
        Some(s) => Some(Duration::from_secs(s.unsigned_abs())),
        None => policy.default,
    };
    let ttl = match (ttl, policy.max) {
        (Some(t), Some(max)) if t > max => {
            if let Some(s) = ttl_seconds {
                return Err(invalid(
                    s,
                    format!(
                        "must be less than or equal to {} (the server's maximum)",
                        max.as_secs()
                    ),
                ));
            }
            // The default is above the maximum: the maximum applies.
            Some(max)
        }
        (None, Some(max)) => {
            if let Some(s) = ttl_seconds {
                return Err(invalid(
                    s,
                    format!(
                        "0 (no time limit) is not allowed: the server's maximum is {}",
                        max.as_secs()
                    ),
                ));
            }
            Some(max)
        }
        (t, _) => t,
    };
    let Some(ttl) = ttl else {
        return Ok(None);
    };
    let span = jiff::SignedDuration::try_from(ttl)
        .map_err(|_| invalid(ttl_seconds.unwrap_or_default(), "is too large".to_owned()))?;
    let at = now
        .checked_add(span)
        .map_err(|_| invalid(ttl_seconds.unwrap_or_default(), "is too large".to_owned()))?;
    // Whole seconds, rounded up, as `status.expiresAt` (a `metav1.Time`) shows it: the limit
    // is never shorter than asked, and the object and the pod say the same.
    let whole = at.as_second() + i64::from(at.subsec_nanosecond() > 0);
    jiff::Timestamp::from_second(whole)
        .map(Some)
        .map_err(|_| invalid(ttl_seconds.unwrap_or_default(), "is too large".to_owned()))
}

/// The earlier of a time limit's deadline and a hard one (a debug request's window).
pub(crate) fn earliest(
    a: Option<jiff::Timestamp>,
    b: Option<jiff::Timestamp>,
) -> Option<jiff::Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        "2026-01-02T03:04:05Z".parse().expect("timestamp")
    }

    fn at(s: &str) -> Option<jiff::Timestamp> {
        Some(s.parse().expect("timestamp"))
    }

    const H8: Duration = Duration::from_secs(8 * 3600);

    #[test]
    fn the_request_else_the_default_sets_the_deadline() {
        let p = TtlPolicy {
            default: Some(H8),
            max: None,
        };
        assert_eq!(
            deadline(&p, None, "d", now()).expect("ok"),
            at("2026-01-02T11:04:05Z")
        );
        assert_eq!(
            deadline(&p, Some(60), "d", now()).expect("ok"),
            at("2026-01-02T03:05:05Z")
        );
        assert_eq!(
            deadline(&p, Some(0), "d", now()).expect("ok"),
            None,
            "0 = no limit"
        );
        let none = TtlPolicy::default();
        assert_eq!(deadline(&none, None, "d", now()).expect("ok"), None);
    }

    #[test]
    fn deadlines_are_whole_seconds_rounded_up() {
        let p = TtlPolicy::default();
        let now: jiff::Timestamp = "2026-01-02T03:04:05.25Z".parse().expect("timestamp");
        assert_eq!(
            deadline(&p, Some(1), "d", now).expect("ok"),
            at("2026-01-02T03:04:07Z")
        );
    }

    #[test]
    fn the_maximum_refuses_longer_limits_on_ttl_seconds() {
        let p = TtlPolicy {
            default: Some(H8),
            max: Some(Duration::from_secs(3600)),
        };
        for (ttl, detail) in [
            (
                3601,
                "must be less than or equal to 3600 (the server's maximum)",
            ),
            (
                0,
                "0 (no time limit) is not allowed: the server's maximum is 3600",
            ),
            (-1, "must be greater than or equal to 0"),
        ] {
            let err = deadline(&p, Some(ttl), "dbg", now()).expect_err("refused");
            let status = err.to_status();
            assert_eq!(status.code, Some(422));
            let causes = status.details.and_then(|d| d.causes).unwrap_or_default();
            assert_eq!(causes.len(), 1);
            assert_eq!(causes[0].field.as_deref(), Some("ttlSeconds"));
            assert!(
                causes[0]
                    .message
                    .as_deref()
                    .unwrap_or_default()
                    .ends_with(detail),
                "{:?}",
                causes[0].message
            );
        }
        assert_eq!(
            deadline(&p, Some(3600), "d", now()).expect("ok"),
            at("2026-01-02T04:04:05Z")
        );
        // A default above the maximum is cut to it rather than refusing every create.
        assert_eq!(
            deadline(&p, None, "d", now()).expect("ok"),
            at("2026-01-02T04:04:05Z")
        );
    }
}
