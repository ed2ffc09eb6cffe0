//! Every document, serialized once, with its hash and `ETag`, ready to serve.
//!
//! The aggregator fetches `/apis`, `/openapi/v2` and `/openapi/v3` with `If-None-Match` and
//! caches by `ETag` (and treats a 304 without an `ETag` as an error), so every document carries
//! one. As in kube-openapi, the `ETag` is the upper-case hex SHA-512 of the bytes, quoted.

use bytes::Bytes;
use serde::Serialize;

use crate::aggregated::{AggregatedVersion, aggregated_discovery};
use crate::discovery::{api_group, api_group_list, api_resource_list};
use crate::error::Error;
use crate::hash::content_hash;
use crate::negotiate::{
    CONTENT_TYPE_AGGREGATED_V2, CONTENT_TYPE_AGGREGATED_V2BETA1, CONTENT_TYPE_JSON, DiscoveryFormat,
};
use crate::openapi_v2::openapi_v2;
use crate::openapi_v3::{group_version_key, openapi_v3_group_version, openapi_v3_index_for};

/// One serialized document.
#[derive(Clone, Debug)]
pub struct Document {
    bytes: Bytes,
    hash: String,
    etag: String,
    content_type: &'static str,
}

impl Document {
    /// Serializes `value` as compact JSON.
    pub fn new<T: Serialize>(
        document: &'static str,
        value: &T,
        content_type: &'static str,
    ) -> Result<Document, Error> {
        let bytes =
            serde_json::to_vec(value).map_err(|source| Error::Serialize { document, source })?;
        Ok(Document::from_bytes(bytes, content_type))
    }

    fn from_bytes(bytes: Vec<u8>, content_type: &'static str) -> Document {
        let hash = content_hash(&bytes);
        Document {
            etag: format!("\"{hash}\""),
            hash,
            bytes: Bytes::from(bytes),
            content_type,
        }
    }

    /// The body (cheap to clone).
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Upper-case hex SHA-512 of the body.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The `ETag` header value (the quoted hash).
    pub fn etag(&self) -> &str {
        &self.etag
    }

    /// The `Content-Type` to answer with.
    pub fn content_type(&self) -> &'static str {
        self.content_type
    }

    /// Whether a request with this `If-None-Match` header gets `304 Not Modified` (with the
    /// `ETag`). Handles `*`, lists and weak validators (`W/"…"`), comparing weakly as RFC 9110
    /// requires for `If-None-Match`.
    pub fn not_modified(&self, if_none_match: &str) -> bool {
        if_none_match.split(',').any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == self.etag
        })
    }
}

/// Every document this crate builds, computed once at startup.
#[derive(Clone, Debug)]
pub struct Documents {
    /// `GET /apis` in the legacy form (`APIGroupList`).
    pub api_group_list: Document,
    /// `GET /apis/poddebug.dev` (`APIGroup`).
    pub api_group: Document,
    /// `GET /apis/poddebug.dev/v1alpha1` (`APIResourceList`).
    pub api_resource_list: Document,
    /// `GET /apis` as `apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`.
    pub aggregated_v2: Document,
    /// `GET /apis` as `apidiscovery.k8s.io/v2beta1` `APIGroupDiscoveryList`.
    pub aggregated_v2beta1: Document,
    /// `GET /openapi/v2`.
    pub openapi_v2: Document,
    /// `GET /openapi/v3`.
    pub openapi_v3_index: Document,
    /// `GET /openapi/v3/apis/poddebug.dev/v1alpha1`.
    pub openapi_v3_group_version: Document,
}

impl Documents {
    /// Generates and serializes every document.
    pub fn new() -> Result<Documents, Error> {
        let openapi_v3_group_version = Document::new(
            "OpenAPI v3 group version",
            &openapi_v3_group_version(),
            CONTENT_TYPE_JSON,
        )?;
        let index = openapi_v3_index_for(openapi_v3_group_version.bytes());
        Ok(Documents {
            api_group_list: Document::new("APIGroupList", &api_group_list(), CONTENT_TYPE_JSON)?,
            api_group: Document::new("APIGroup", &api_group(), CONTENT_TYPE_JSON)?,
            api_resource_list: Document::new(
                "APIResourceList",
                &api_resource_list(),
                CONTENT_TYPE_JSON,
            )?,
            aggregated_v2: Document::new(
                "APIGroupDiscoveryList v2",
                &aggregated_discovery(AggregatedVersion::V2),
                CONTENT_TYPE_AGGREGATED_V2,
            )?,
            aggregated_v2beta1: Document::new(
                "APIGroupDiscoveryList v2beta1",
                &aggregated_discovery(AggregatedVersion::V2Beta1),
                CONTENT_TYPE_AGGREGATED_V2BETA1,
            )?,
            openapi_v2: Document::new("OpenAPI v2", &openapi_v2(), CONTENT_TYPE_JSON)?,
            openapi_v3_index: Document::new("OpenAPI v3 index", &index, CONTENT_TYPE_JSON)?,
            openapi_v3_group_version,
        })
    }

    /// The answer to `GET /apis` in `format`; `None` for [`DiscoveryFormat::NotAcceptable`].
    pub fn apis(&self, format: DiscoveryFormat) -> Option<&Document> {
        match format {
            DiscoveryFormat::AggregatedV2 => Some(&self.aggregated_v2),
            DiscoveryFormat::AggregatedV2Beta1 => Some(&self.aggregated_v2beta1),
            DiscoveryFormat::Legacy => Some(&self.api_group_list),
            DiscoveryFormat::NotAcceptable => None,
        }
    }

    /// `/openapi/v3/apis/poddebug.dev/v1alpha1?hash=…`, where a request for the group-version
    /// document with a stale `hash` is redirected (301), as kube-openapi does. A request whose
    /// `hash` matches may be answered with `Cache-Control: public, immutable`.
    pub fn openapi_v3_server_relative_url(&self) -> String {
        format!(
            "/openapi/v3/{}?hash={}",
            group_version_key(),
            self.openapi_v3_group_version.hash()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::etag;
    use crate::openapi_v3::openapi_v3_index;
    use serde_json::Value;

    fn parse(doc: &Document) -> Value {
        serde_json::from_slice(doc.bytes()).expect("valid JSON")
    }

    #[test]
    fn all_documents_parse_and_carry_etags() {
        let docs = Documents::new().expect("documents");
        for doc in [
            &docs.api_group_list,
            &docs.api_group,
            &docs.api_resource_list,
            &docs.aggregated_v2,
            &docs.aggregated_v2beta1,
            &docs.openapi_v2,
            &docs.openapi_v3_index,
            &docs.openapi_v3_group_version,
        ] {
            assert!(parse(doc).is_object());
            assert_eq!(doc.hash(), content_hash(doc.bytes()));
            assert_eq!(doc.etag(), etag(doc.bytes()));
            assert_eq!(doc.etag().len(), 130);
        }
        assert_eq!(parse(&docs.api_group_list)["kind"], "APIGroupList");
        assert_eq!(parse(&docs.api_group)["kind"], "APIGroup");
        assert_eq!(parse(&docs.api_resource_list)["kind"], "APIResourceList");
        assert_eq!(
            parse(&docs.aggregated_v2)["apiVersion"],
            "apidiscovery.k8s.io/v2"
        );
        assert_eq!(
            parse(&docs.aggregated_v2beta1)["apiVersion"],
            "apidiscovery.k8s.io/v2beta1"
        );
        assert_eq!(parse(&docs.openapi_v2)["swagger"], "2.0");
        assert_eq!(parse(&docs.openapi_v3_group_version)["openapi"], "3.0.0");
    }

    #[test]
    fn v3_index_hash_is_the_hash_of_the_served_bytes() {
        let docs = Documents::new().expect("documents");
        let index = parse(&docs.openapi_v3_index);
        let url = &index["paths"]["apis/poddebug.dev/v1alpha1"]["serverRelativeURL"];
        assert_eq!(url, &Value::String(docs.openapi_v3_server_relative_url()));
        assert_eq!(
            docs.openapi_v3_server_relative_url(),
            format!(
                "/openapi/v3/apis/poddebug.dev/v1alpha1?hash={}",
                content_hash(docs.openapi_v3_group_version.bytes())
            )
        );
        // The public function serializes the same way.
        assert_eq!(openapi_v3_index(), index);
    }

    #[test]
    fn generation_is_deterministic() {
        let a = Documents::new().expect("documents");
        let b = Documents::new().expect("documents");
        assert_eq!(a.openapi_v2.etag(), b.openapi_v2.etag());
        assert_eq!(a.openapi_v3_index.bytes(), b.openapi_v3_index.bytes());
    }

    #[test]
    fn content_types_follow_the_format() {
        let docs = Documents::new().expect("documents");
        for format in [
            DiscoveryFormat::AggregatedV2,
            DiscoveryFormat::AggregatedV2Beta1,
            DiscoveryFormat::Legacy,
        ] {
            let doc = docs.apis(format).expect("answerable");
            assert_eq!(doc.content_type(), format.content_type());
        }
        assert!(docs.apis(DiscoveryFormat::NotAcceptable).is_none());
    }

    #[test]
    fn if_none_match() {
        let doc = Document::from_bytes(b"{}".to_vec(), CONTENT_TYPE_JSON);
        let tag = doc.etag().to_owned();
        assert!(doc.not_modified(&tag));
        assert!(doc.not_modified(&format!("W/{tag}")));
        assert!(doc.not_modified(&format!("\"other\", {tag}")));
        assert!(doc.not_modified("*"));
        assert!(!doc.not_modified("\"other\""));
        assert!(!doc.not_modified(""));
        assert!(
            !doc.not_modified(doc.hash()),
            "unquoted is not the same tag"
        );
    }

    #[test]
    fn hash_format() {
        // SHA-512 of the empty string, upper-case as Go's %X prints it.
        assert!(content_hash(b"").starts_with("CF83E1357EEFB8BDF1542850D66D8007"));
        assert_eq!(etag(b"").len(), 130);
    }
}
