//! core/v1 Nodes: cluster-scoped, served read-only (get, list, watch; a missing one is kube's
//! `nodes "x" not found`). [`FAKE_NODE`], where the fake's kubelet runs every pod that names no
//! node, exists from the start; tests add others with [`super::FakeKube::add_node`].

use serde_json::{Map, Value, json};

use super::state::{new_uid, now_rfc3339};

/// The node the fake's scheduler and kubelet put every pod on that names none.
pub const FAKE_NODE: &str = "fake-node";

/// A Ready Node as a kubelet v1.36 registers it (its labels, capacity, conditions, addresses
/// and nodeInfo), plus `labels`.
pub fn node_object(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut l = Map::new();
    for (k, v) in [
        ("beta.kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", "linux"),
    ] {
        l.insert(k.to_owned(), json!(v));
    }
    for (k, v) in labels {
        l.insert((*k).to_owned(), json!(v));
    }
    let now = now_rfc3339();
    let resources = json!({
        "cpu": "2",
        "ephemeral-storage": "264212084Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "24684092Ki",
        "pods": "110",
    });
    let condition = |t: &str, status: &str, reason: &str, message: &str| {
        json!({"type": t, "status": status, "lastHeartbeatTime": now, "lastTransitionTime": now,
               "reason": reason, "message": message})
    };
    json!({
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": new_uid(),
            "creationTimestamp": now,
            "labels": l,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.10"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": new_uid().replace('-', ""),
                "systemUUID": new_uid(),
                "bootID": new_uid(),
                "kernelVersion": "6.18.44",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.6.20",
                "kubeletVersion": "v1.36.2",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_ready_and_labelled_with_its_hostname() {
        let n = node_object("node-1", &[("role", "debug")]);
        assert_eq!(n["metadata"]["labels"]["kubernetes.io/hostname"], "node-1");
        assert_eq!(n["metadata"]["labels"]["role"], "debug");
        let ready = n["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .cloned();
        assert_eq!(ready.map(|r| r["status"].clone()), Some(json!("True")));
        assert!(n["metadata"].get("namespace").is_none(), "cluster-scoped");
    }
}
