#!/usr/bin/env bash
# Remove poddebug from the cluster of the current kubeconfig, in the order that never leaves the
# API registered without a server behind it (an unavailable APIService makes discovery fail and
# every namespace deletion in the cluster wait; docs/troubleshooting.md):
#   1. the APIService v1alpha1.poddebug.dev, and wait until discovery no longer lists the group;
#   2. everything the kustomization made (-k; default: the self-signed overlay), namespaces
#      included, waiting for them to be gone: the Deployment, its Service and PDB, RBAC, the
#      persona ClusterRoles, and with the namespace poddebug-system what the server wrote there
#      (the record key and serving CA Secrets, session, stop and debug-request Leases, leader
#      Leases), with poddebug-nodes its node debug pods;
#   3. what the server made elsewhere: copies of pods (label poddebug.dev/kind=copy; keep them
#      with --keep-copies) and its Events (reportingComponent poddebug);
#   4. a check that none of it is left (alone with --check).
# Not removable: a debug container added to a pod stays in that pod's status until the pod is
# deleted (Kubernetes never removes an ephemeral container). Recordings in the object store or
# the recording volume stay where they are (docs/operator-guide.md, "Uninstall").
#
#   manifests/uninstall.sh [-k KUSTOMIZATION] [--keep-copies] [--check] [--timeout S]
set -euo pipefail
cd "$(dirname "$0")/.."
KUSTOMIZATION=deploy/self-signed
KEEP_COPIES=0
CHECK_ONLY=0
TIMEOUT=180
APISERVICE=v1alpha1.poddebug.dev
say() { echo "uninstall: $*" >&2; }
die() { say "$*"; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in
    -k) KUSTOMIZATION=$2; shift 2 ;;
    --keep-copies) KEEP_COPIES=1; shift ;;
    --check) CHECK_ONLY=1; shift ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    *) die "unknown argument $1 (usage: $0 [-k KUSTOMIZATION] [--keep-copies] [--check] [--timeout S])" ;;
  esac
done
command -v kubectl >/dev/null || die "kubectl is not on PATH"

# What is left of poddebug, one line each; empty when nothing is.
leftovers() {
  kubectl get apiservice "$APISERVICE" -o name --ignore-not-found
  kubectl get validatingwebhookconfiguration,validatingadmissionpolicy,validatingadmissionpolicybinding \
    poddebug-only-way-in -o name --ignore-not-found 2>/dev/null || true
  kubectl get namespace poddebug-system poddebug-nodes -o name --ignore-not-found
  kubectl get clusterroles,clusterrolebindings -o name | grep poddebug || true
  kubectl get roles,rolebindings -A -o custom-columns=KIND:.kind,NS:.metadata.namespace,NAME:.metadata.name --no-headers |
    awk '$3 ~ /poddebug/ {print tolower($1) "/" $3 " -n " $2}'
  [ "$KEEP_COPIES" = 1 ] || kubectl get pods -A -l poddebug.dev/kind -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name --no-headers |
    awk '{print "pod/" $2 " -n " $1}'
  kubectl get events -A --field-selector reportingComponent=poddebug -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name --no-headers |
    awk '{print "event/" $2 " -n " $1}'
}

check() {
  local left
  left=$(leftovers)
  if [ -n "$left" ]; then
    say "left in the cluster:"
    printf '%s\n' "$left" | sed 's/^/  /' >&2
    return 1
  fi
  say "nothing of poddebug is left in the cluster"
}

if [ "$CHECK_ONLY" = 1 ]; then
  check
  exit
fi
[ -f "$KUSTOMIZATION/kustomization.yaml" ] || die "no kustomization in $KUSTOMIZATION"

# 1. The admission of the component only-way-in and the API first: from here on nothing waits
#    on a poddebug server (the webhook's failurePolicy is Fail: with the server gone, core
#    attach and exec would be refused cluster-wide until it is removed).
kubectl delete validatingwebhookconfiguration poddebug-only-way-in --ignore-not-found >&2
kubectl delete validatingadmissionpolicybinding poddebug-only-way-in --ignore-not-found >&2
kubectl delete validatingadmissionpolicy poddebug-only-way-in --ignore-not-found >&2
kubectl delete apiservice "$APISERVICE" --ignore-not-found --wait=true --timeout="${TIMEOUT}s" >&2
end=$((SECONDS + TIMEOUT))
while kubectl get --raw /apis/poddebug.dev >/dev/null 2>&1; do
  [ $SECONDS -lt $end ] || die "poddebug.dev is still discovered ${TIMEOUT}s after its APIService was deleted"
  sleep 1
done
say "APIService $APISERVICE removed; poddebug.dev is no longer served"

# 2. Everything the kustomization made (the APIService in it is gone already).
kubectl kustomize "$KUSTOMIZATION" |
  kubectl delete -f - --ignore-not-found --wait=true --timeout="${TIMEOUT}s" >&2
say "removed what $KUSTOMIZATION made"

# 3. What the server made outside its namespaces.
if [ "$KEEP_COPIES" = 0 ]; then
  kubectl delete pods -A -l poddebug.dev/kind=copy --ignore-not-found --wait=true --timeout="${TIMEOUT}s" >&2
fi
kubectl delete events -A --field-selector reportingComponent=poddebug --ignore-not-found >&2

# 4.
check
