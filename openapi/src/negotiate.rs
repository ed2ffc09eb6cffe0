//! Content negotiation for discovery: which form of `/apis` an `Accept` header asks for.
//!
//! The aggregator asks `GET /apis` with
//! `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList`
//! and caches the answer only when its `Content-Type` names the same group, version and kind
//! (`discovery.ContentTypeIsGVK`); anything else makes it fall back to legacy discovery.
//! client-go adds `application/json` as a last choice, and newer versions put
//! `…;v=v2;as=APIGroupDiscoveryList;profile=nopeer` first.
//!
//! Media ranges are taken by descending `q`, ties in the client's order, as kube-apiserver's
//! negotiation does. Protobuf and YAML are not offered by this server.

use crate::aggregated::{AggregatedVersion, DISCOVERY_GROUP};

/// `Content-Type` of an `apidiscovery.k8s.io/v2` answer.
pub const CONTENT_TYPE_AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// `Content-Type` of an `apidiscovery.k8s.io/v2beta1` answer.
pub const CONTENT_TYPE_AGGREGATED_V2BETA1: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
/// `Content-Type` of every plain JSON answer.
pub const CONTENT_TYPE_JSON: &str = "application/json";

/// The form to answer a discovery request with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiscoveryFormat {
    /// Aggregated discovery, `apidiscovery.k8s.io/v2`.
    AggregatedV2,
    /// Aggregated discovery, `apidiscovery.k8s.io/v2beta1`.
    AggregatedV2Beta1,
    /// Legacy discovery (`APIGroupList`, `APIGroup`, `APIResourceList`) as `application/json`.
    Legacy,
    /// Nothing the client accepts can be produced: answer 406 with a `Status` (as
    /// `application/json`).
    NotAcceptable,
}

impl DiscoveryFormat {
    /// The exact `Content-Type` of the answer.
    pub fn content_type(self) -> &'static str {
        match self {
            DiscoveryFormat::AggregatedV2 => CONTENT_TYPE_AGGREGATED_V2,
            DiscoveryFormat::AggregatedV2Beta1 => CONTENT_TYPE_AGGREGATED_V2BETA1,
            DiscoveryFormat::Legacy | DiscoveryFormat::NotAcceptable => CONTENT_TYPE_JSON,
        }
    }

    /// The aggregated version, for the two aggregated forms.
    pub fn aggregated_version(self) -> Option<AggregatedVersion> {
        match self {
            DiscoveryFormat::AggregatedV2 => Some(AggregatedVersion::V2),
            DiscoveryFormat::AggregatedV2Beta1 => Some(AggregatedVersion::V2Beta1),
            DiscoveryFormat::Legacy | DiscoveryFormat::NotAcceptable => None,
        }
    }
}

/// The form to answer `GET /apis` with, from the request's `Accept` header (`""` when absent).
pub fn negotiate_discovery(accept: &str) -> DiscoveryFormat {
    negotiate(accept, true)
}

/// The form to answer `GET /apis/poddebug.dev` and `GET /apis/poddebug.dev/v1alpha1` with:
/// these exist only in the legacy form, so the answer is [`DiscoveryFormat::Legacy`] or
/// [`DiscoveryFormat::NotAcceptable`].
pub fn negotiate_legacy(accept: &str) -> DiscoveryFormat {
    negotiate(accept, false)
}

fn negotiate(accept: &str, aggregated: bool) -> DiscoveryFormat {
    if accept.trim().is_empty() {
        return DiscoveryFormat::Legacy;
    }
    let mut ranges: Vec<MediaRange<'_>> = accept.split(',').filter_map(MediaRange::parse).collect();
    // Stable: equal q keeps the client's order.
    ranges.sort_by(|a, b| b.q.total_cmp(&a.q));
    ranges
        .iter()
        .filter(|r| r.q > 0.0)
        .find_map(|r| r.format(aggregated))
        .unwrap_or(DiscoveryFormat::NotAcceptable)
}

/// One media range of an `Accept` header.
struct MediaRange<'a> {
    ty: &'a str,
    subtype: &'a str,
    q: f32,
    group: Option<&'a str>,
    version: Option<&'a str>,
    as_kind: Option<&'a str>,
    profile: Option<&'a str>,
}

impl<'a> MediaRange<'a> {
    fn parse(text: &'a str) -> Option<Self> {
        let mut parts = text.split(';');
        let (ty, subtype) = parts.next()?.trim().split_once('/')?;
        let mut range = MediaRange {
            ty: ty.trim(),
            subtype: subtype.trim(),
            q: 1.0,
            group: None,
            version: None,
            as_kind: None,
            profile: None,
        };
        for param in parts {
            let Some((key, value)) = param.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"');
            match key.trim().to_ascii_lowercase().as_str() {
                "q" => range.q = value.parse().unwrap_or(0.0),
                "g" => range.group = Some(value),
                "v" => range.version = Some(value),
                "as" => range.as_kind = Some(value),
                "profile" => range.profile = Some(value),
                _ => {}
            }
        }
        Some(range)
    }

    fn is_json(&self) -> bool {
        let ty = self.ty.eq_ignore_ascii_case("application") || self.ty == "*";
        let subtype = self.subtype.eq_ignore_ascii_case("json") || self.subtype == "*";
        ty && subtype && !(self.ty == "*" && self.subtype != "*")
    }

    fn format(&self, aggregated: bool) -> Option<DiscoveryFormat> {
        if !self.is_json() {
            return None;
        }
        match (self.group, self.version, self.as_kind) {
            (None, None, None) => Some(DiscoveryFormat::Legacy),
            (Some(DISCOVERY_GROUP), Some(version), Some("APIGroupDiscoveryList"))
                if aggregated && matches!(self.profile, None | Some("nopeer")) =>
            {
                match version {
                    "v2" => Some(DiscoveryFormat::AggregatedV2),
                    "v2beta1" => Some(DiscoveryFormat::AggregatedV2Beta1),
                    _ => None,
                }
            }
            // Some other object (a Table, a protobuf-only kind, …): not something we produce.
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DiscoveryFormat::*;

    const AGGREGATOR: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
    const CLIENT_GO: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

    #[test]
    fn aggregator_and_client_go_get_v2() {
        assert_eq!(negotiate_discovery(AGGREGATOR), AggregatedV2);
        assert_eq!(negotiate_discovery(CLIENT_GO), AggregatedV2);
        assert_eq!(
            negotiate_discovery(CLIENT_GO).content_type(),
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
    }

    #[test]
    fn nopeer_profile_is_v2() {
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer,application/json";
        assert_eq!(negotiate_discovery(accept), AggregatedV2);
        let unknown = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=other,application/json";
        assert_eq!(negotiate_discovery(unknown), Legacy);
    }

    #[test]
    fn old_clients_get_v2beta1() {
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(negotiate_discovery(accept), AggregatedV2Beta1);
        assert_eq!(
            AggregatedV2Beta1.content_type(),
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        );
    }

    #[test]
    fn plain_json_and_wildcards_get_legacy() {
        assert_eq!(negotiate_discovery(""), Legacy);
        assert_eq!(negotiate_discovery("application/json"), Legacy);
        assert_eq!(negotiate_discovery("application/json, */*"), Legacy);
        assert_eq!(negotiate_discovery("*/*"), Legacy);
        assert_eq!(negotiate_discovery("application/*"), Legacy);
        assert_eq!(
            negotiate_discovery("Application/JSON; charset=utf-8"),
            Legacy
        );
        assert_eq!(Legacy.content_type(), "application/json");
    }

    #[test]
    fn q_values_order_the_choices() {
        let accept = "application/json;q=0.9,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        assert_eq!(negotiate_discovery(accept), AggregatedV2);
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0.5,application/json";
        assert_eq!(negotiate_discovery(accept), Legacy);
        let refused = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0";
        assert_eq!(negotiate_discovery(refused), NotAcceptable);
    }

    #[test]
    fn protobuf_yaml_and_other_kinds_are_not_acceptable() {
        let protobuf = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        assert_eq!(negotiate_discovery(protobuf), NotAcceptable);
        assert_eq!(
            negotiate_discovery(&format!("{protobuf},{AGGREGATOR}")),
            AggregatedV2
        );
        assert_eq!(negotiate_discovery("application/yaml"), NotAcceptable);
        assert_eq!(
            negotiate_discovery("application/json;as=Table;v=v1;g=meta.k8s.io"),
            NotAcceptable
        );
        assert_eq!(
            negotiate_discovery(
                "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"
            ),
            NotAcceptable
        );
        assert_eq!(negotiate_discovery("garbage"), NotAcceptable);
        assert_eq!(NotAcceptable.content_type(), "application/json");
    }

    #[test]
    fn group_version_documents_are_only_legacy() {
        assert_eq!(negotiate_legacy(CLIENT_GO), Legacy);
        assert_eq!(negotiate_legacy(AGGREGATOR), NotAcceptable);
        assert_eq!(negotiate_legacy(""), Legacy);
        assert_eq!(negotiate_legacy("application/json"), Legacy);
    }

    #[test]
    fn aggregated_version_of_each_format() {
        assert_eq!(
            AggregatedV2.aggregated_version(),
            Some(AggregatedVersion::V2)
        );
        assert_eq!(
            AggregatedV2Beta1.aggregated_version(),
            Some(AggregatedVersion::V2Beta1)
        );
        assert_eq!(Legacy.aggregated_version(), None);
    }
}
