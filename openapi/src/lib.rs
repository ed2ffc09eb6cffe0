//! Discovery and OpenAPI documents of `poddebug.dev/v1alpha1`, generated from one table of
//! served resources ([`resources::RESOURCES`]) and the JSON schemas of the types.
//!
//! | Path | Built by |
//! |---|---|
//! | `/apis` (legacy) | [`api_group_list`] |
//! | `/apis` (aggregated, `apidiscovery.k8s.io/v2`, `v2beta1`) | [`aggregated_discovery`] |
//! | `/apis/poddebug.dev` | [`api_group`] |
//! | `/apis/poddebug.dev/v1alpha1` | [`api_resource_list`] |
//! | `/openapi/v2` | [`openapi_v2`] |
//! | `/openapi/v3` | [`openapi_v3_index`] |
//! | `/openapi/v3/apis/poddebug.dev/v1alpha1` | [`openapi_v3_group_version`] |
//!
//! [`negotiate_discovery`] picks the form of `/apis` from the `Accept` header, and
//! [`Documents`] holds every document serialized once, with its `ETag`, for the server to cache.
//!
//! Nothing here does IO; it only builds documents.
#![warn(missing_docs)]

pub mod aggregated;
mod dialect;
pub mod discovery;
pub mod documents;
pub mod error;
pub mod hash;
pub mod negotiate;
pub mod openapi_v2;
pub mod openapi_v3;
mod operations;
pub mod params;
pub mod resources;
mod schemas;
#[cfg(test)]
mod testing;

pub use aggregated::{APIGroupDiscoveryList, AggregatedVersion, aggregated_discovery};
pub use discovery::{api_group, api_group_list, api_resource_list};
pub use documents::{Document, Documents};
pub use error::Error;
pub use hash::{content_hash, etag};
pub use negotiate::{DiscoveryFormat, negotiate_discovery, negotiate_legacy};
pub use openapi_v2::openapi_v2;
pub use openapi_v3::{openapi_v3_group_version, openapi_v3_index};
