//! The origins of the cluster's own API server, learned from the cluster and kept fresh.
//!
//! A client that is not a browser may still send `Origin`: Python's websocket-client (and so
//! the official Kubernetes Python client's `stream()`) names the server it dials,
//! `Origin: https://127.0.0.1:6443`. Behind the aggregator that cannot be compared with the
//! addressed origin (on an upgrade the aggregator rewrites `Host` and sets no
//! `X-Forwarded-Host`), so the browser-context guard ([`crate::cross_site`]) also accepts an
//! `Origin` that names the API server itself. A page served from that origin is already
//! same-origin with the whole Kubernetes API (core `pods/attach` and `exec` included), so
//! accepting it gives no page anything it did not have.
//!
//! Where the origins come from (all `https`; compared canonically, [`Origin`]):
//! - the `server` of the kubeconfig (or in-cluster configuration) this server itself uses;
//! - `kube-public/cluster-info` (kubeadm's and most installers' published kubeconfig): the
//!   `server` of each of its clusters;
//! - the `default/kubernetes` Service: each ClusterIP, and the names its serving certificate
//!   is issued for by kube-apiserver and kubeadm ([`SERVICE_NAMES`]), at each Service port;
//! - the EndpointSlices kube-apiserver keeps for that Service (`default/kubernetes`, and
//!   `kubernetes-v4`/`kubernetes-v6` in dual-stack clusters): each address at each port.
//!
//! The three objects are watched (one watch each, by name or label, resumed with backoff after
//! an error); every change recomputes that source's origins from the object as it now is, so
//! the set follows the cluster and never grows beyond what the objects hold, each source
//! capped at [`MAX_PER_SOURCE`]. A source that cannot be read (a permission missing) keeps
//! what it last learned and logs why.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::{WatchStreamExt, reflector, watcher};

use crate::origin::Origin;

/// The names of the `kubernetes` Service that kube-apiserver's and kubeadm's serving
/// certificates hold, for the default cluster domain. A cluster with another domain lists its
/// name in `--allowed-origins`.
pub const SERVICE_NAMES: [&str; 4] = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// The most origins one source contributes (the rest are left out, with a warning).
pub const MAX_PER_SOURCE: usize = 64;

/// Namespace and name of the published cluster information.
pub const CLUSTER_INFO: (&str, &str) = ("kube-public", "cluster-info");
/// Namespace and name of the API server's Service.
pub const SERVICE: (&str, &str) = ("default", "kubernetes");
/// The EndpointSlices kube-apiserver maintains for its Service.
const ENDPOINT_SLICES: [&str; 3] = ["kubernetes", "kubernetes-v4", "kubernetes-v6"];

/// Where an origin was learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// The server URL of this server's own kubeconfig or in-cluster configuration.
    OwnConfig,
    /// `kube-public/cluster-info`.
    ClusterInfo,
    /// The `default/kubernetes` Service.
    Service,
    /// Its EndpointSlices.
    EndpointSlices,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::OwnConfig => "own kubeconfig",
            Source::ClusterInfo => "kube-public/cluster-info",
            Source::Service => "default/kubernetes Service",
            Source::EndpointSlices => "default/kubernetes EndpointSlices",
        }
    }
}

/// The learned origins, by source.
#[derive(Debug, Default)]
pub struct ApiServerOrigins {
    sources: RwLock<BTreeMap<Source, BTreeSet<Origin>>>,
}

impl ApiServerOrigins {
    /// Knows only the server URL this server uses itself (if it is an `https` URL).
    pub fn new(own_server_url: &str) -> ApiServerOrigins {
        let origins = ApiServerOrigins::default();
        origins.set(
            Source::OwnConfig,
            Origin::of_server_url(own_server_url).into_iter().collect(),
        );
        origins
    }

    /// Whether `origin` names the cluster's API server.
    pub fn contains(&self, origin: &Origin) -> bool {
        self.sources
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .any(|s| s.contains(origin))
    }

    /// Every origin known, each once.
    pub fn all(&self) -> BTreeSet<Origin> {
        self.sources
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .flatten()
            .cloned()
            .collect()
    }

    /// Replaces what `source` says (capped at [`MAX_PER_SOURCE`]); logs a change.
    pub fn set(&self, source: Source, origins: Vec<Origin>) {
        let total = origins.len();
        let mut kept = BTreeSet::new();
        for o in origins {
            if kept.len() == MAX_PER_SOURCE {
                break;
            }
            kept.insert(o);
        }
        if total > kept.len() {
            tracing::warn!(
                source = source.name(),
                kept = kept.len(),
                "the API server's origins from one source are capped"
            );
        }
        let mut sources = self.sources.write().unwrap_or_else(|e| e.into_inner());
        let changed = sources.get(&source).is_none_or(|old| *old != kept);
        if changed {
            let list: Vec<String> = kept.iter().map(Origin::to_string).collect();
            tracing::info!(
                source = source.name(),
                origins = list.join(","),
                "the API server's origins"
            );
            sources.insert(source, kept);
        }
    }

    /// Follows the three objects until the process ends (see the module documentation).
    pub fn spawn_watches(self: &Arc<Self>, client: kube::Client) {
        let (ns, name) = CLUSTER_INFO;
        tokio::spawn(follow(
            kube::Api::<ConfigMap>::namespaced(client.clone(), ns),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
            self.clone(),
            Source::ClusterInfo,
            |cms: &[Arc<ConfigMap>]| cms.iter().flat_map(|c| of_cluster_info(c)).collect(),
        ));
        let (ns, name) = SERVICE;
        tokio::spawn(follow(
            kube::Api::<Service>::namespaced(client.clone(), ns),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
            self.clone(),
            Source::Service,
            |svcs: &[Arc<Service>]| svcs.iter().flat_map(|s| of_service(s)).collect(),
        ));
        tokio::spawn(follow(
            kube::Api::<EndpointSlice>::namespaced(client, ns),
            watcher::Config::default().labels(&format!("kubernetes.io/service-name={name}")),
            self.clone(),
            Source::EndpointSlices,
            |slices: &[Arc<EndpointSlice>]| {
                slices
                    .iter()
                    .filter(|s| {
                        s.metadata
                            .name
                            .as_deref()
                            .is_some_and(|n| ENDPOINT_SLICES.contains(&n))
                    })
                    .flat_map(|s| of_endpoint_slice(s))
                    .collect()
            },
        ));
    }
}

/// Watches the objects `cfg` selects and, after each change, sets `source` to what `learn`
/// makes of all of them.
async fn follow<K>(
    api: kube::Api<K>,
    cfg: watcher::Config,
    origins: Arc<ApiServerOrigins>,
    source: Source,
    learn: impl Fn(&[Arc<K>]) -> Vec<Origin>,
) where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let mut events = reflector(writer, watcher(api, cfg).default_backoff()).boxed();
    while let Some(event) = events.next().await {
        match event {
            // While a list is replayed, the store changes only at its end.
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Ok(_) => origins.set(source, learn(&reader.state())),
            Err(e) => tracing::warn!(
                source = source.name(),
                error = %e,
                "cannot read where the API server is (is the server's account bound to the Roles in manifests/rbac.yaml?); keeping what was learned"
            ),
        }
    }
}

/// The `server` of every cluster in `cluster-info`'s `kubeconfig`.
pub fn of_cluster_info(cm: &ConfigMap) -> Vec<Origin> {
    let Some(text) = cm.data.as_ref().and_then(|d| d.get("kubeconfig")) else {
        return Vec::new();
    };
    match kube::config::Kubeconfig::from_yaml(text) {
        Ok(kc) => kc
            .clusters
            .iter()
            .filter_map(|c| c.cluster.as_ref()?.server.as_deref())
            .filter_map(Origin::of_server_url)
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "kube-public/cluster-info holds no kubeconfig poddebug can read");
            Vec::new()
        }
    }
}

/// Every ClusterIP and every name of [`SERVICE_NAMES`], at each TCP port of the Service.
pub fn of_service(svc: &Service) -> Vec<Origin> {
    let Some(spec) = &svc.spec else {
        return Vec::new();
    };
    let mut ips: Vec<&str> = Vec::new();
    for ip in spec
        .cluster_ips
        .iter()
        .flatten()
        .chain(spec.cluster_ip.as_ref())
    {
        if ip.parse::<std::net::IpAddr>().is_ok() && !ips.contains(&ip.as_str()) {
            ips.push(ip);
        }
    }
    let ports = spec
        .ports
        .iter()
        .flatten()
        .filter(|p| p.protocol.as_deref().is_none_or(|p| p == "TCP"))
        .filter_map(|p| u16::try_from(p.port).ok());
    ports
        .flat_map(|port| {
            ips.iter()
                .copied()
                .chain(SERVICE_NAMES)
                .filter_map(move |host| Origin::https(host, port))
        })
        .collect()
}

/// Every IP address of the slice at each of its TCP ports.
pub fn of_endpoint_slice(slice: &EndpointSlice) -> Vec<Origin> {
    if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
        return Vec::new();
    }
    let ports: Vec<u16> = slice
        .ports
        .iter()
        .flatten()
        .filter(|p| p.protocol.as_deref().is_none_or(|p| p == "TCP"))
        .filter_map(|p| u16::try_from(p.port?).ok())
        .collect();
    slice
        .endpoints
        .iter()
        .flat_map(|e| &e.addresses)
        .filter(|a| a.parse::<std::net::IpAddr>().is_ok())
        .flat_map(|a| ports.iter().filter_map(move |p| Origin::https(a, *p)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn o(s: &str) -> Origin {
        Origin::parse(s).unwrap_or_else(|| panic!("{s:?}"))
    }

    fn strings(origins: &[Origin]) -> Vec<String> {
        origins.iter().map(Origin::to_string).collect()
    }

    /// kubeadm's cluster-info, as `kubeadm init` publishes it.
    fn cluster_info(server: &str) -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {
                "kubeconfig": format!("apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: LS0tLS1CRUdJTg==\n    server: {server}\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n"),
                "jws-kubeconfig-abcdef": "eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiY2RlZiJ9..x",
            }
        }))
        .expect("a ConfigMap")
    }

    #[test]
    fn cluster_info_names_the_server() {
        assert_eq!(
            strings(&of_cluster_info(&cluster_info(
                "https://API.Example.com:6443"
            ))),
            ["https://api.example.com:6443"]
        );
        // Not https, not a kubeconfig, no kubeconfig: nothing.
        assert!(of_cluster_info(&cluster_info("http://10.0.0.1:8080")).is_empty());
        let mut cm = cluster_info("https://x");
        cm.data
            .as_mut()
            .expect("data")
            .insert("kubeconfig".into(), "{{not yaml".into());
        assert!(of_cluster_info(&cm).is_empty());
        assert!(of_cluster_info(&ConfigMap::default()).is_empty());
    }

    #[test]
    fn the_kubernetes_service_names_its_ips_and_names_at_its_port() {
        // As kube-apiserver v1.36 keeps it (live shape), dual-stack.
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "kubernetes", "namespace": "default"},
            "spec": {
                "ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": 6443}],
                "clusterIP": "10.96.0.1",
                "clusterIPs": ["10.96.0.1", "FD00:10:96::1"],
                "type": "ClusterIP",
            }
        }))
        .expect("a Service");
        assert_eq!(
            strings(&of_service(&svc)),
            [
                "https://10.96.0.1",
                "https://[fd00:10:96::1]",
                "https://kubernetes",
                "https://kubernetes.default",
                "https://kubernetes.default.svc",
                "https://kubernetes.default.svc.cluster.local",
            ]
        );
        let headless: Service = serde_json::from_value(json!({
            "spec": {"clusterIP": "None", "ports": [{"port": 8443}]}
        }))
        .expect("a Service");
        assert_eq!(of_service(&headless).len(), SERVICE_NAMES.len());
        assert!(of_service(&Service::default()).is_empty());
    }

    #[test]
    fn endpoint_slices_name_addresses_at_ports() {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv6",
            "endpoints": [{"addresses": ["fd00::10"], "conditions": {"ready": true}},
                          {"addresses": ["fd00::11"], "conditions": {"ready": false}}],
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"},
                      {"name": "dns", "port": 53, "protocol": "UDP"}],
        }))
        .expect("an EndpointSlice");
        assert_eq!(
            strings(&of_endpoint_slice(&slice)),
            ["https://[fd00::10]:6443", "https://[fd00::11]:6443"]
        );
        let fqdn: EndpointSlice = serde_json::from_value(json!({
            "addressType": "FQDN",
            "endpoints": [{"addresses": ["evil.example"]}],
            "ports": [{"port": 443}],
        }))
        .expect("an EndpointSlice");
        assert!(of_endpoint_slice(&fqdn).is_empty());
    }

    #[test]
    fn each_source_is_replaced_and_bounded() {
        let origins = ApiServerOrigins::new("https://127.0.0.1:6443/");
        assert!(origins.contains(&o("https://127.0.0.1:6443")));
        origins.set(Source::ClusterInfo, vec![o("https://api.example:6443")]);
        assert!(origins.contains(&o("https://API.example:6443")));
        // A newer cluster-info replaces the older one's origin; the other sources stay.
        origins.set(Source::ClusterInfo, vec![o("https://api2.example:6443")]);
        assert!(!origins.contains(&o("https://api.example:6443")));
        assert!(origins.contains(&o("https://api2.example:6443")));
        assert!(origins.contains(&o("https://127.0.0.1:6443")));
        origins.set(Source::ClusterInfo, Vec::new());
        assert_eq!(origins.all(), BTreeSet::from([o("https://127.0.0.1:6443")]));
        let many: Vec<Origin> = (0..1000u16)
            .filter_map(|i| Origin::https("10.0.0.1", 1000 + i))
            .collect();
        origins.set(Source::EndpointSlices, many);
        assert_eq!(origins.all().len(), 1 + MAX_PER_SOURCE);
        // What no source names is not the API server.
        for other in [
            "http://127.0.0.1:6443",
            "https://127.0.0.1:6443.evil.example",
            "https://127.0.0.1",
            "https://evil.example",
        ] {
            assert!(
                Origin::parse(other).is_none_or(|o| !origins.contains(&o)),
                "{other}"
            );
        }
        // A server this server reaches over plain HTTP names no origin.
        assert!(
            ApiServerOrigins::new("http://127.0.0.1:8080")
                .all()
                .is_empty()
        );
    }
}
