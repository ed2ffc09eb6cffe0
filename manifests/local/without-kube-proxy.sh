#!/usr/bin/env bash
# Stand in for kube-proxy on a one-node test cluster that runs none (../shared/realcluster), for
# the two Services poddebug needs, until stopped (Ctrl-C or SIGTERM):
#   - the `kubernetes` Service's ClusterIP forwards to kube-apiserver, so that pods (poddebug's
#     replicas, with their in-cluster configuration) reach it;
#   - poddebug's Service's ClusterIP (poddebug-system/poddebug-apiserver, once it exists)
#     forwards to its ready endpoints, so that the aggregator reaches the replicas.
# The addresses are added to this host's loopback (removed on exit) and served by
# .ci/service-proxy.py; pods started from now on get a default route through the node's bridge
# (realcluster's CNI configuration gives them only the pod subnet). As root, on the node, with
# KUBECONFIG and REALCLUSTER_STATE set as ../shared/realcluster/up.sh exports them.
#
#   manifests/local/without-kube-proxy.sh [--apiserver HOST:PORT]   (default 127.0.0.1:6443)
set -euo pipefail
cd "$(dirname "$0")/../.."
APISERVER=127.0.0.1:6443
while [ $# -gt 0 ]; do
  case $1 in
    --apiserver) APISERVER=$2; shift 2 ;;
    *) echo "without-kube-proxy: unknown argument $1" >&2; exit 2 ;;
  esac
done
: "${REALCLUSTER_STATE:?REALCLUSTER_STATE must name the state directory of the test cluster, as up.sh exports it}"
KUBERNETES_IP=$(kubectl get service kubernetes -n default -o jsonpath='{.spec.clusterIP}')
wired=()
pids=()
stop() {
  local pid ip
  set +e
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  for ip in "${wired[@]}"; do ip addr del "$ip/32" dev lo 2>/dev/null; done
}
trap stop EXIT
trap 'exit 0' INT TERM
wire() {
  ip addr show dev lo | grep -q " $1/32" || { ip addr add "$1/32" dev lo; wired+=("$1"); }
}
for conf in "$REALCLUSTER_STATE"/cni/net.d/*.conflist; do
  grep -q isDefaultGateway "$conf" ||
    sed -i 's/"isGateway": true,/"isGateway": true, "isDefaultGateway": true,/' "$conf"
done
wire "$KUBERNETES_IP"
python3 .ci/service-proxy.py "$KUBERNETES_IP:443=$APISERVER" &
pids+=($!)
echo "without-kube-proxy: $KUBERNETES_IP:443 -> $APISERVER; waiting for poddebug's Service (Ctrl-C stops)" >&2
ip=
while [ -z "$ip" ]; do
  ip=$(kubectl -n poddebug-system get service poddebug-apiserver -o jsonpath='{.spec.clusterIP}' 2>/dev/null || true)
  [ -n "$ip" ] || sleep 1
done
wire "$ip"
python3 .ci/service-proxy.py "$ip:443=poddebug-system/poddebug-apiserver" &
pids+=($!)
echo "without-kube-proxy: $ip:443 -> the ready endpoints of poddebug-system/poddebug-apiserver" >&2
wait
