//! Where the API server is, as a cluster says it: the `default/kubernetes` Service and the
//! EndpointSlices kube-apiserver's endpoint reconciler keeps for it, and kubeadm's
//! `kube-public/cluster-info` ConfigMap. Shapes as kube-apiserver v1.36 stores them (checked
//! with kubectl on the real cluster). Reads, lists and watches go through the generic handlers.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::state::{new_uid, now_rfc3339};

/// The ClusterIP of the `kubernetes` Service (the first address of the default
/// `--service-cluster-ip-range`, 10.96.0.0/12).
pub const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";

/// The `kubernetes` Service in `default` as kube-apiserver creates it: port 443 (`https`) to
/// `secure_port`, single-stack IPv4.
pub fn kubernetes_service(secure_port: u16) -> Value {
    json!({
        "kind": "Service",
        "apiVersion": "v1",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "uid": new_uid(),
            "creationTimestamp": now_rfc3339(),
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": secure_port}],
            "clusterIP": KUBERNETES_SERVICE_IP,
            "clusterIPs": [KUBERNETES_SERVICE_IP],
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
        },
        "status": {"loadBalancer": {}},
    })
}

/// An EndpointSlice of the `kubernetes` Service as the endpoint reconciler writes it: named
/// `name` (`kubernetes`, or `kubernetes-v4`/`-v6` for a dual-stack cluster's second family),
/// one ready endpoint per address, the `https` port. kube-apiserver writes none when it
/// advertises a loopback address (the real test cluster's case).
pub fn kubernetes_endpoint_slice(
    name: &str,
    address_type: &str,
    addresses: &[&str],
    port: u16,
) -> Value {
    let endpoints: Vec<Value> = addresses
        .iter()
        .map(|a| json!({"addresses": [a], "conditions": {"ready": true}}))
        .collect();
    json!({
        "kind": "EndpointSlice",
        "apiVersion": "discovery.k8s.io/v1",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": new_uid(),
            "creationTimestamp": now_rfc3339(),
            "labels": {"kubernetes.io/service-name": "kubernetes"},
        },
        "addressType": address_type,
        "endpoints": endpoints,
        "ports": [{"name": "https", "protocol": "TCP", "port": port}],
    })
}

/// The data of kubeadm's `kube-public/cluster-info`: a kubeconfig naming `server` with the
/// cluster's CA, and no users.
pub fn cluster_info_data(server: &str, ca_pem: &str) -> BTreeMap<String, String> {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let kubeconfig = format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server}\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n"
    );
    BTreeMap::from([("kubeconfig".to_owned(), kubeconfig)])
}
