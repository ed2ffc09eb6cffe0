#!/usr/bin/env bash
# Build the poddebug-apiserver image from this repository without a registry: the server as a
# static executable (glibc linked in, `-C target-feature=+crt-static`), then an image FROM
# scratch holding only that file, run as user 65532 (Containerfile beside this script).
#
#   manifests/image/build.sh [--tag IMAGE] [--archive FILE] [--tool buildah|podman|docker]
#                            [--binary PATH]
#
#   --tag      the image's name (default poddebug/poddebug-apiserver:0.1.0)
#   --archive  also write the image as a docker-archive tarball (for `ctr images import`,
#              `docker load`, `kind load image-archive`, or a registry mirror's upload)
#   --tool     which builder to use (default: the first of buildah, podman, docker found)
#   --binary   use this static executable instead of building one
#
# The binary is built with `cargo build --release --locked --target x86_64-unknown-linux-gnu`
# (the explicit target keeps the static linking away from build scripts and proc macros); it is
# at target/x86_64-unknown-linux-gnu/release/poddebug-apiserver (under CARGO_TARGET_DIR if set).
set -euo pipefail
cd "$(dirname "$0")/../.."
die() { echo "image: $*" >&2; exit 1; }
say() { echo "image: $*" >&2; }

TAG=poddebug/poddebug-apiserver:0.1.0
ARCHIVE=
TOOL=
BINARY=
while [ $# -gt 0 ]; do
  case $1 in
    --tag) TAG=$2; shift 2 ;;
    --archive) ARCHIVE=$2; shift 2 ;;
    --tool) TOOL=$2; shift 2 ;;
    --binary) BINARY=$2; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done

if [ -z "$BINARY" ]; then
  RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --release --locked --target x86_64-unknown-linux-gnu -p poddebug-apiserver
  BINARY=${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/poddebug-apiserver
fi
[ -x "$BINARY" ] || die "no executable at $BINARY"
# Static: no interpreter, no shared libraries (ldd names none).
if ldd "$BINARY" 2>&1 | grep -q '=>'; then
  die "$BINARY is linked dynamically; an image FROM scratch cannot run it"
fi

if [ -z "$TOOL" ]; then
  for t in buildah podman docker; do
    if command -v "$t" >/dev/null; then TOOL=$t; break; fi
  done
fi
[ -n "$TOOL" ] || die "no buildah, podman or docker found (apt-get install buildah)"

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
# Without debug info: a release build has none, a debug build (CI makes its image of one) loses
# a quarter of its size. The symbols stay, so a panic's backtrace still names functions.
objcopy --strip-debug "$BINARY" "$ctx/poddebug-apiserver"
cp manifests/image/Containerfile "$ctx/Containerfile"
case $TOOL in
  buildah)
    # vfs works everywhere, also inside containers without overlay support.
    export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
    buildah bud --quiet -f "$ctx/Containerfile" -t "$TAG" "$ctx" >/dev/null
    if [ -n "$ARCHIVE" ]; then
      rm -f "$ARCHIVE"
      buildah push --quiet "$TAG" "docker-archive:$ARCHIVE:$TAG"
    fi
    ;;
  podman)
    podman build --quiet -f "$ctx/Containerfile" -t "$TAG" "$ctx" >/dev/null
    if [ -n "$ARCHIVE" ]; then rm -f "$ARCHIVE"; podman save --quiet -o "$ARCHIVE" "$TAG"; fi
    ;;
  docker)
    docker build --quiet -f "$ctx/Containerfile" -t "$TAG" "$ctx" >/dev/null
    if [ -n "$ARCHIVE" ]; then docker save -o "$ARCHIVE" "$TAG"; fi
    ;;
  *) die "unknown tool $TOOL" ;;
esac
say "built $TAG with $TOOL from $BINARY ($(stat -c %s "$ctx/poddebug-apiserver") bytes)${ARCHIVE:+; archive $ARCHIVE}"
