#!/usr/bin/env bash
# Run poddebug against the cluster of the current kubeconfig through kube-apiserver's aggregator,
# the way a deployed server is reached: a serving certificate for <service>.<namespace>.svc from
# a private CA, an ExternalName Service to localhost, and the APIService with that CA as its
# caBundle (never insecureSkipTLSVerify). See docs/operator-guide.md, "Running against a local
# cluster".
#
#   manifests/local/register.sh up [OPTIONS] [-- SERVER ARGS...]   all of the below, server included
#   manifests/local/register.sh cert [OPTIONS]      CA + serving certificate, Secret poddebug-apiserver-tls
#   manifests/local/register.sh start [OPTIONS] [-- SERVER ARGS...]   start the server in the background
#   manifests/local/register.sh register [OPTIONS]  Service + APIService (+ the persona ClusterRoles
#                                                  of manifests/personas.yaml), then wait until served
#   manifests/local/register.sh cabundle [OPTIONS]  put the CA into the existing APIService (the
#                                                  one `kubectl apply -k manifests/` made), then wait
#   manifests/local/register.sh wait [OPTIONS]      wait for Available, discovery and OpenAPI
#   manifests/local/register.sh down [OPTIONS]      stop the server `start` began, remove the registration
#
# Options:
#   --port N          the server's port on this host (default 8443)
#   --dir D           certificates, pid and log file (default apiserver.local.config/aggregator)
#   --binary PATH     the server binary (default target/debug/poddebug-apiserver, built if missing)
#   --timeout S       how long `register`/`wait` wait for aggregation (default 120)
# The Service and namespace are poddebug-apiserver and poddebug-system, as in manifests/.
# Progress goes to stderr. Needs kubectl, openssl and (for start) curl.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SVC=poddebug-apiserver
NS=poddebug-system
APISERVICE=v1alpha1.poddebug.dev
GV=/apis/poddebug.dev/v1alpha1
PORT=8443
DIR=apiserver.local.config/aggregator
BINARY=
TIMEOUT=120
say() { echo "register: $*" >&2; }
die() { say "$*"; exit 1; }

cmd=${1:-}
[ -n "$cmd" ] || die "usage: $0 up|cert|start|register|cabundle|wait|down [--port N] [--dir D] [--binary PATH] [--timeout S] [-- SERVER ARGS]"
shift
server_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --port) PORT=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --binary) BINARY=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --) shift; server_args=("$@"); break ;;
    *) die "unknown option $1" ;;
  esac
done
command -v kubectl >/dev/null || die "kubectl is not on PATH"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

ensure_namespace() {
  # Through apply, so that a later `kubectl apply -k manifests/` owns it without a warning.
  kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
}

# A private CA (kept in --dir and reused) and a serving certificate it signs for the names the
# aggregator and local clients use. The Secret has the name manifests/deployment.yaml mounts.
cert() {
  command -v openssl >/dev/null || die "openssl is not on PATH"
  if [ ! -f "$DIR/ca.crt" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$DIR/ca.key" -out "$DIR/ca.crt" \
      -subj "/CN=poddebug-local-ca" -days 3650 2>/dev/null
  fi
  if [ ! -f "$DIR/tls.crt" ] || ! openssl x509 -in "$DIR/tls.crt" -noout -checkend 86400 >/dev/null; then
    openssl req -newkey rsa:2048 -nodes -keyout "$DIR/tls.key" -out "$DIR/tls.csr" \
      -subj "/CN=$SVC.$NS.svc" 2>/dev/null
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth" \
      "subjectAltName=DNS:$SVC.$NS.svc,DNS:$SVC.$NS.svc.cluster.local,DNS:localhost,IP:127.0.0.1" >"$DIR/tls.ext"
    openssl x509 -req -in "$DIR/tls.csr" -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" -CAcreateserial \
      -days 365 -extfile "$DIR/tls.ext" -out "$DIR/tls.crt" 2>/dev/null
    rm -f "$DIR/tls.csr" "$DIR/tls.ext"
  fi
  chmod 600 "$DIR/ca.key" "$DIR/tls.key"
  ensure_namespace
  kubectl create secret generic "$SVC-tls" -n "$NS" --type=kubernetes.io/tls \
    --from-file=tls.crt="$DIR/tls.crt" --from-file=tls.key="$DIR/tls.key" --from-file=ca.crt="$DIR/ca.crt" \
    --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  say "serving certificate for $SVC.$NS.svc in $DIR (Secret $NS/$SVC-tls)"
}

start() {
  [ -f "$DIR/tls.crt" ] || cert
  if [ -f "$DIR/server.pid" ] && kill -0 "$(cat "$DIR/server.pid")" 2>/dev/null; then
    die "a server started here already runs (pid $(cat "$DIR/server.pid")); run '$0 down' first"
  fi
  if [ -z "$BINARY" ]; then
    BINARY=target/debug/poddebug-apiserver
    [ -x "$BINARY" ] || cargo build -p poddebug-apiserver >&2
  fi
  [ -x "$BINARY" ] || die "no server binary at $BINARY"
  # The kubeconfig is the caller's (KUBECONFIG or ~/.kube/config), as the server's fallback.
  nohup "$BINARY" --secure-port="$PORT" --bind-address=127.0.0.1 \
    --tls-cert-file="$DIR/tls.crt" --tls-private-key-file="$DIR/tls.key" \
    --service-name="$SVC" --service-namespace="$NS" ${server_args[@]+"${server_args[@]}"} \
    >"$DIR/server.log" 2>&1 &
  echo $! >"$DIR/server.pid"
  local i
  for i in $(seq 1 120); do
    kill -0 "$(cat "$DIR/server.pid")" 2>/dev/null || { tail -20 "$DIR/server.log" >&2; die "the server exited"; }
    if curl -fsS --cacert "$DIR/ca.crt" "https://localhost:$PORT/readyz" >/dev/null 2>&1; then
      say "server ready on https://localhost:$PORT (pid $(cat "$DIR/server.pid"), log $DIR/server.log)"
      return 0
    fi
    sleep 0.5
  done
  die "the server did not become ready in 60s; see $DIR/server.log"
}

# Poll `what` (a shell condition) every second until it holds or --timeout passes.
poll() {
  local what=$1 end=$((SECONDS + TIMEOUT))
  shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || die "$what did not happen within ${TIMEOUT}s"
    sleep 1
  done
}
available() {
  [ "$(kubectl get apiservice "$APISERVICE" -o jsonpath='{.status.conditions[?(@.type=="Available")].status}')" = True ]
}
discovered() {
  kubectl get --raw "$GV" | grep -q '"poddebugcontainers"' &&
    kubectl get --raw /apis | grep -q '"poddebug.dev/v1alpha1"'
}
openapi_v2() { kubectl get --raw /openapi/v2 | grep -q 'dev.poddebug.v1alpha1.PodDebugContainer'; }
openapi_v3() { kubectl get --raw /openapi/v3 | grep -q "\"apis/poddebug.dev/v1alpha1\""; }
explained() { kubectl explain poddebugcontainers.status.phase | grep -q Running; }

wait_served() {
  poll "APIService $APISERVICE Available" available
  poll "discovery of poddebug.dev/v1alpha1" discovered
  poll "the group in /openapi/v2" openapi_v2
  poll "the group in /openapi/v3" openapi_v3
  poll "kubectl explain poddebugcontainers" explained
  say "served through the aggregator: Available, in discovery and in OpenAPI v2/v3"
}

register() {
  [ -f "$DIR/ca.crt" ] || cert
  ensure_namespace
  local ca
  ca=$(base64 <"$DIR/ca.crt" | tr -d '\n')
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata:
  name: $SVC
  namespace: $NS
spec:
  type: ExternalName
  externalName: localhost
  ports:
    - {name: https, port: $PORT, targetPort: $PORT}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: $APISERVICE
spec:
  group: poddebug.dev
  version: v1alpha1
  service: {name: $SVC, namespace: $NS, port: $PORT}
  caBundle: $ca
  groupPriorityMinimum: 1000
  versionPriority: 15
EOF
  # The user roles and the node-debug namespace, as a deployment from manifests/ has them.
  kubectl apply -f "$HERE/../personas.yaml" >/dev/null
  kubectl apply -f "$HERE/../node-debug-namespace.yaml" >/dev/null
  say "registered $APISERVICE -> $SVC.$NS.svc:$PORT (ExternalName localhost), with the persona roles"
  wait_served
}

# For a server deployed by manifests/ without cert-manager: the APIService it created gets the
# CA of the certificate `cert` put in the Secret. A later `kubectl apply -k manifests/` keeps it.
cabundle() {
  [ -f "$DIR/ca.crt" ] || die "no CA in $DIR: run '$0 cert' first"
  local ca
  ca=$(base64 <"$DIR/ca.crt" | tr -d '\n')
  kubectl patch apiservice "$APISERVICE" --type=merge -p "{\"spec\":{\"caBundle\":\"$ca\"}}" >/dev/null
  say "caBundle of $APISERVICE set from $DIR/ca.crt"
  wait_served
}

down() {
  kubectl delete apiservice "$APISERVICE" --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete service "$SVC" -n "$NS" --ignore-not-found >/dev/null 2>&1 || true
  if [ -f "$DIR/server.pid" ]; then
    local pid
    pid=$(cat "$DIR/server.pid")
    if kill "$pid" 2>/dev/null; then
      for _ in $(seq 1 80); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$DIR/server.pid"
  fi
  say "unregistered; server stopped"
}

case $cmd in
  up) cert; start; register ;;
  cert) cert ;;
  start) start ;;
  register) register ;;
  cabundle) cabundle ;;
  wait) wait_served ;;
  down) down ;;
  *) die "unknown command $cmd" ;;
esac
