//! The just-in-time access flags, and the policy they freeze into.

use std::collections::BTreeMap;
use std::time::Duration;

use poddebug_types::Profile;

/// The longest duration of a request for a profile `--max-request-durations` does not name.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(4 * 3600);

/// The just-in-time access flags.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct RequestOptions {
    /// Profiles that a user without 'use' on them may still get through an approved
    /// DebugRequest, each with the number of distinct approvers it needs
    /// (PROFILE[:APPROVALS], e.g. 'sysadmin:2,netadmin:1'; APPROVALS defaults to 1). A node
    /// debug container's profile is the one its pod amounts to. Empty: debug requests are
    /// refused.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "PROFILE:N",
        help_heading = "Just-in-time access"
    )]
    pub approval_profiles: Vec<String>,
    /// The longest duration a DebugRequest may ask for, per profile (PROFILE:DURATION, e.g.
    /// 'sysadmin:1h,netadmin:4h'); a profile not named here gets 4h. The window starts at
    /// approval.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "PROFILE:DURATION",
        help_heading = "Just-in-time access"
    )]
    pub max_request_durations: Vec<String>,
    /// Every debug container, copy and node debug container must carry a reason (the body's
    /// top-level 'reason', beside an optional 'ticket'), or be made under a DebugRequest,
    /// whose reason it then carries; otherwise the create is refused (422).
    #[arg(long, help_heading = "Just-in-time access")]
    pub require_reason: bool,
    /// POST a JSON event (with a Slack-compatible 'text') to this URL when a DebugRequest is
    /// created, approved, denied, used, revoked, withdrawn or expires. Sent from a bounded
    /// queue with retries and backoff; never delays or fails a request. http:// or https://.
    #[arg(long, value_name = "URL", help_heading = "Just-in-time access")]
    pub notify_webhook: Option<String>,
}

/// What the flags decide.
#[derive(Clone, Debug, Default)]
pub struct RequestPolicy {
    /// The profiles a request may be for, and how many approvals each needs.
    pub approvals: BTreeMap<Profile, u32>,
    /// The longest duration of each profile's requests.
    pub max_durations: BTreeMap<Profile, Duration>,
    /// `--require-reason`.
    pub require_reason: bool,
    /// `--notify-webhook`.
    pub notify_webhook: Option<url::Url>,
}

impl RequestPolicy {
    /// How many approvals a request for `p` needs; `None` when `p` cannot be requested.
    pub fn approvals(&self, p: Profile) -> Option<u32> {
        self.approvals.get(&p).copied()
    }

    /// The longest duration of a request for `p`.
    pub fn max_duration(&self, p: Profile) -> Duration {
        self.max_durations
            .get(&p)
            .copied()
            .unwrap_or(DEFAULT_MAX_DURATION)
    }

    /// The profiles that can be requested, in order.
    pub fn profiles(&self) -> Vec<&'static str> {
        self.approvals.keys().map(|p| p.as_str()).collect()
    }
}

fn profile(flag: &str, s: &str, errs: &mut Vec<String>) -> Option<Profile> {
    let p = Profile::parse(s.trim());
    if p.is_none() {
        errs.push(format!(
            "{flag}: unknown profile {s:?} (one of {})",
            Profile::names().join(", ")
        ));
    }
    p
}

impl RequestOptions {
    /// The policy, or every problem of the flags.
    pub fn policy(&self) -> Result<RequestPolicy, Vec<String>> {
        let mut errs = Vec::new();
        let mut policy = RequestPolicy {
            require_reason: self.require_reason,
            ..Default::default()
        };
        for item in self
            .approval_profiles
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
        {
            let (name, count) = item.split_once(':').unwrap_or((item, "1"));
            let Some(p) = profile("--approval-profiles", name, &mut errs) else {
                continue;
            };
            if matches!(p, Profile::Baseline | Profile::Restricted) {
                errs.push(format!(
                    "--approval-profiles: {p} isolates the container and needs no approval"
                ));
                continue;
            }
            match count.trim().parse::<u32>() {
                Ok(n) if (1..=10).contains(&n) => {
                    policy.approvals.insert(p, n);
                }
                _ => errs.push(format!(
                    "--approval-profiles: {item:?}: the number of approvals must be 1 to 10"
                )),
            }
        }
        for item in self
            .max_request_durations
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
        {
            let Some((name, d)) = item.split_once(':') else {
                errs.push(format!(
                    "--max-request-durations: {item:?} is not PROFILE:DURATION"
                ));
                continue;
            };
            let Some(p) = profile("--max-request-durations", name, &mut errs) else {
                continue;
            };
            match poddebug_types::duration::parse(d) {
                Ok(v) if v >= Duration::from_secs(1) => {
                    policy.max_durations.insert(p, v);
                }
                _ => errs.push(format!(
                    "--max-request-durations: {item:?}: the duration must be at least 1s, like 30m or 1h"
                )),
            }
        }
        if let Some(u) = self.notify_webhook.as_deref() {
            match url::Url::parse(u) {
                Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
                    policy.notify_webhook = Some(url);
                }
                _ => errs.push(format!(
                    "--notify-webhook: {u:?} is not an http:// or https:// URL"
                )),
            }
        }
        if errs.is_empty() {
            Ok(policy)
        } else {
            Err(errs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(approval: &[&str], max: &[&str], hook: Option<&str>) -> RequestOptions {
        RequestOptions {
            approval_profiles: approval.iter().map(|s| (*s).to_owned()).collect(),
            max_request_durations: max.iter().map(|s| (*s).to_owned()).collect(),
            require_reason: false,
            notify_webhook: hook.map(str::to_owned),
        }
    }

    #[test]
    fn profiles_approvals_and_durations() {
        let p = opts(
            &["sysadmin:2", "netadmin"],
            &["sysadmin:1h"],
            Some("https://hooks.example/x"),
        )
        .policy()
        .expect("valid");
        assert_eq!(p.approvals(Profile::Sysadmin), Some(2));
        assert_eq!(p.approvals(Profile::Netadmin), Some(1));
        assert_eq!(p.approvals(Profile::General), None);
        assert_eq!(p.max_duration(Profile::Sysadmin), Duration::from_secs(3600));
        assert_eq!(p.max_duration(Profile::Netadmin), DEFAULT_MAX_DURATION);
        assert_eq!(p.profiles(), ["netadmin", "sysadmin"]);
    }

    #[test]
    fn every_bad_value_is_reported() {
        let errs = opts(
            &["root", "baseline", "sysadmin:0"],
            &["sysadmin", "netadmin:soon"],
            Some("ftp://x"),
        )
        .policy()
        .expect_err("invalid");
        assert_eq!(errs.len(), 6, "{errs:?}");
    }
}
