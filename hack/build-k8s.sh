#!/usr/bin/env bash
# Builds the real Kubernetes control plane the e2e suite runs on: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, KWOK and Helm, from upstream Go modules; also
# promtool (the chart's PrometheusRule is checked and unit-tested with it), the LeaderWorkerSet controller
# (multi-node services), kube-score (the score tier) and, download only, the Gateway API Inference
# Extension's v1 InferencePool CRD (the e2e suite installs it).
#
# Why build instead of download: this machine reaches only the Go module proxy (no release tarballs,
# no container images), and Debian's etcd 3.4 is too old for current API servers. Each tool goes to
# ${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/tools/<tool>-<version>/ with a stamp file, so a warm
# run only checks the stamps; the Go module and build caches are the user's ordinary ones and are
# reused across versions.
#
# Why stages: a cold build of everything takes 40-60 min on 2 cores, but the local cluster and most e2e
# tests need only the core set. Each tool has its own lock and stamp, so `hack/build-k8s.sh core` returns
# as soon as the core tools are there while another invocation (hack/test.sh's background `all`) goes on
# with LWS, promtool and kube-score; a caller asking for a tool that another invocation is building waits
# on that tool's lock only.
#
# Usage: hack/build-k8s.sh [STAGE...]  build what is missing of the stages (default: core); the LAST stdout
#                                     line is a bin directory with symlinks to every tool of those stages,
#                                     progress goes to stderr.
# Stages: core (helm, etcd, kwok, kubernetes, gie-crds), one tool by name (helm, etcd, kwok, kubernetes,
#         gie-crds, kube-score, promtool, lws), extras (kube-score, promtool, lws), all (core, then extras).
# Versions can be overridden with AIS_K8S_VERSION, AIS_ETCD_VERSION, AIS_KWOK_VERSION, AIS_HELM_VERSION,
# AIS_LWS_VERSION, AIS_PROMETHEUS_VERSION, AIS_GIE_VERSION, AIS_KUBE_SCORE_VERSION. The bin directory also
# holds crds/ (the GIE CRD) with gie-crds and lws-crds/ with lws.
set -euo pipefail

# v1.37.2 is the newest k8s.io/kubernetes release on the proxy; its go.mod says `go 1.26.0`, which the
# installed Go 1.26 satisfies (GOTOOLCHAIN=local forbids fetching a newer toolchain).
K8S_VERSION="${AIS_K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${AIS_ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${AIS_KWOK_VERSION:-v0.8.0}"
HELM_VERSION="${AIS_HELM_VERSION:-v3.22.0}"
# LeaderWorkerSet runs multi-node engine groups (spec.parallelism.nodes > 1); hack/local-cluster lws starts it.
LWS_VERSION="${AIS_LWS_VERSION:-v0.7.0}"
# Prometheus' Go module is tagged v0.<major*100+minor>.<patch>: v0.316.0 is Prometheus 3.16.0.
PROMETHEUS_VERSION="${AIS_PROMETHEUS_VERSION:-v0.316.0}"
GIE_VERSION="${AIS_GIE_VERSION:-v1.0.0}"
# v1.20.0 is the only kube-score version the module proxy lists; its go.mod needs no newer Go than 1.26.
KUBE_SCORE_VERSION="${AIS_KUBE_SCORE_VERSION:-v1.20.0}"

cache="${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator"
tools="$cache/tools"
mkdir -p "$tools"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false}"

log() { echo "build-k8s: $*" >&2; }
now() { date +%s; }

# Locks: each tool has its own ($tools/.lock-<tool>-<version>), held while it is checked and built, so
# two invocations never build the same tool and one asking only for the core set never waits for LWS.
# $tools/.lock is held shared for the whole run: an older copy of this script (another checkout on the
# same machine) takes it exclusively before it removes leftover build directories, so it cannot remove
# one of ours while we build.
exec 9>"$tools/.lock"
if ! flock -s -n 9; then
  log "an older build-k8s.sh holds $tools/.lock; waiting"
  flock -s 9
fi
ticker_pid=""
trap '[[ -n "$ticker_pid" ]] && kill "$ticker_pid" 2>/dev/null; true' EXIT

# `go build` is silent while it compiles: say every minute that it is still at work. The ticker drops the
# lock fds and takes its sleep down with it when killed, so it leaves no process behind.
tick() {
  exec 8>&- 9>&-
  local what="$1" t0="$2" s=""
  trap '[[ -n "$s" ]] && kill "$s" 2>/dev/null; exit 0' TERM
  while :; do
    sleep 60 &
    s=$!
    wait "$s"
    log "$what: still building, $((($(now) - t0) / 60)) min so far"
  done
}

# build_once NAME VERSION FUNCTION: runs FUNCTION OUT_DIR unless OUT_DIR/.done exists. The build goes to
# a temporary sibling directory renamed into place, so an interrupted build never leaves a stamped
# half-tree behind; holding the tool's lock, any such directory is a leftover and is removed.
build_once() {
  local name="$1" version="$2" fn="$3"
  local out="$tools/$name-$version"
  [[ -f "$out/.done" ]] && { log "$name $version: cached in $out"; return; }
  exec 8>"$tools/.lock-$name-$version"
  if ! flock -n 8; then
    log "$name $version: another invocation is building it; waiting for $tools/.lock-$name-$version"
    flock 8
  fi
  if [[ -f "$out/.done" ]]; then
    log "$name $version: built by the other invocation, in $out"
    exec 8>&-
    return
  fi
  rm -rf "$out".tmp.*
  local tmp="$out.tmp.$$"
  mkdir -p "$tmp/bin"
  local t0
  t0="$(now)"
  log "$name $version: building (cold builds take minutes on 2 cores)"
  tick "$name $version" "$t0" >&2 &
  ticker_pid=$!
  "$fn" "$tmp" "$version"
  kill "$ticker_pid" 2>/dev/null || true
  wait "$ticker_pid" 2>/dev/null || true
  ticker_pid=""
  rm -rf "$out"
  mv -T "$tmp" "$out"
  touch "$out/.done"
  exec 8>&-
  log "$name $version: built in $(($(now) - t0))s"
}

# etcd: the server module has no main package of its own that `go install` can pin, so a two-line
# wrapper module calls etcdmain.Main, which is what etcd's own binary does.
build_etcd() {
  local out="$1" version="$2"
  mkdir -p "$out/src"
  cat >"$out/src/go.mod" <<EOF
module ais.invalid/etcdbuild

go 1.26.0

require go.etcd.io/etcd/server/v3 $version
EOF
  cat >"$out/src/main.go" <<'EOF'
// Command etcd is etcd's own entry point, built from the server module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  (cd "$out/src" && log "etcd: resolving modules" && go mod tidy && log "etcd: compiling" &&
    go build -trimpath -ldflags "-s -w" -o "$out/bin/etcd" .)
}

# Kubernetes: k8s.io/kubernetes replaces every staging module (k8s.io/api, client-go, ...) with a
# ./staging path, and replace directives of a dependency are ignored, so the wrapper go.mod repeats them
# pointing at the published v0.X.Y tags. The list comes from the release's own go.mod: every module
# that it both replaces and requires at v0.0.0.
build_kubernetes() {
  local out="$1" version="$2"
  local minor="${version#v1.}"
  minor="${minor%%.*}"
  local staging_version="v0.${version#v1.}"
  mkdir -p "$out/src"
  log "kubernetes: reading $version's go.mod"
  local gomod
  gomod="$(cd "$out/src" && go mod download -json "k8s.io/kubernetes@$version" |
    sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  local mods
  mods="$(awk '/^replace \(/{r=1; next} r && /^\)/{r=0} r && $2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$gomod" |
    while read -r m; do grep -qE "^[[:space:]]+$m v0\.0\.0" "$gomod" && echo "$m"; done)"
  {
    printf 'module ais.invalid/k8sbuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\n' "$version"
    printf 'tool (\n'
    printf '\tk8s.io/kubernetes/cmd/%s\n' kube-apiserver kube-controller-manager kube-scheduler kubectl
    printf ')\n\nreplace (\n'
    for m in $mods; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done
    printf ')\n'
  } >"$out/src/go.mod"
  log "kubernetes: $(echo "$mods" | wc -w) staging modules pinned to $staging_version; resolving modules"
  (cd "$out/src" && go mod tidy)
  local x=() p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=("-X $p.gitVersion=$version" "-X $p.gitMajor=1" "-X $p.gitMinor=$minor"
      "-X $p.gitTreeState=clean" "-X $p.buildDate=1970-01-01T00:00:00Z")
  done
  log "kubernetes: compiling kube-apiserver, kube-controller-manager, kube-scheduler, kubectl in one go build"
  (cd "$out/src" && go build -trimpath -ldflags "-s -w ${x[*]}" -o "$out/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
}

build_kwok() {
  local out="$1" version="$2"
  GOBIN="$out/bin" go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$version" "sigs.k8s.io/kwok/cmd/kwok@$version"
}

# Helm reports its own version from internal/version and the Kubernetes version it assumes (for
# `.Capabilities` without a cluster) from chartutil/lint; its Makefile sets both, so do we.
build_helm() {
  local out="$1" version="$2"
  local gomod client_go kmajor kminor
  gomod="$(cd "$out" && go mod download -json "helm.sh/helm/v3@$version" |
    sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  client_go="$(awk '$1 == "k8s.io/client-go" {print $2}' "$gomod")"
  kmajor=1
  kminor="$(echo "$client_go" | cut -d. -f2)"
  GOBIN="$out/bin" go install -trimpath -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=$version \
    -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$kmajor \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$kminor \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$kmajor \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$kminor" "helm.sh/helm/v3/cmd/helm@$version"
}

# LeaderWorkerSet: the controller's main package is sigs.k8s.io/lws/cmd, so a wrapper module pins the
# release (the proxy serves an exact version, never a list) and builds it under the name lws-controller.
# The CRD ships in the module (config/crd/bases); hack/local-cluster installs it from the tool dir.
build_lws() {
  local out="$1" version="$2"
  mkdir -p "$out/src" "$out/crds"
  printf 'module ais.invalid/lwsbuild\n\ngo 1.26.0\n\nrequire sigs.k8s.io/lws %s\n\ntool sigs.k8s.io/lws/cmd\n' \
    "$version" >"$out/src/go.mod"
  (cd "$out/src" && log "lws: resolving modules" && go mod tidy && log "lws: compiling" &&
    go build -trimpath -ldflags "-s -w -X sigs.k8s.io/lws/pkg/version.GitVersion=$version" \
      -o "$out/bin/lws-controller" sigs.k8s.io/lws/cmd)
  local dir
  dir="$(cd "$out/src" && go list -m -f '{{.Dir}}' sigs.k8s.io/lws)"
  cp "$dir"/config/crd/bases/*.yaml "$out/crds/"
  chmod u+w "$out"/crds/*.yaml
}

# promtool: `go install` of the module's cmd/promtool. `remove_all_sd` (plugins/plugin_*.go build tags)
# leaves out the cloud service-discovery plugins that `check rules` and `test rules` never use, which
# is most of the compile; the version string is what `promtool --version` prints (the module's VERSION).
build_promtool() {
  local out="$1" version="$2" dir release
  dir="$(cd "$out" && go mod download -json "github.com/prometheus/prometheus@$version" |
    sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  release="$(cat "$dir/VERSION")"
  GOBIN="$out/bin" go install -trimpath -tags remove_all_sd \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release" \
    "github.com/prometheus/prometheus/cmd/promtool@$version"
}

# The Gateway API Inference Extension's v1 InferencePool CRD, as the release's module ships it
# (config/crd/bases); nothing is compiled.
build_gie_crds() {
  local out="$1" version="$2" dir
  dir="$(cd "$out" && go mod download -json "sigs.k8s.io/gateway-api-inference-extension@$version" |
    sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  mkdir -p "$out/crds"
  cp "$dir/config/crd/bases/inference.networking.k8s.io_inferencepools.yaml" "$out/crds/"
}

# kube-score prints its version from main.version/commit/date, which its goreleaser sets; so do we.
build_kube_score() {
  local out="$1" version="$2"
  GOBIN="$out/bin" go install -trimpath \
    -ldflags "-s -w -X main.version=${version#v} -X main.commit=none -X main.date=1970-01-01T00:00:00Z" \
    "github.com/zegl/kube-score/cmd/kube-score@$version"
}

# The tools in build order: helm first (the offline chart tests need nothing else), the control plane,
# then the extras by increasing cold build time, so the tests waiting on each can run while the next builds.
declare -A VERSION=([helm]="$HELM_VERSION" [etcd]="$ETCD_VERSION" [kwok]="$KWOK_VERSION"
  [kubernetes]="$K8S_VERSION" [gie-crds]="$GIE_VERSION" [kube-score]="$KUBE_SCORE_VERSION"
  [promtool]="$PROMETHEUS_VERSION" [lws]="$LWS_VERSION")
ORDER=(helm etcd kwok kubernetes gie-crds kube-score promtool lws)
CORE=(helm etcd kwok kubernetes gie-crds)
EXTRAS=(kube-score promtool lws)

[[ $# -gt 0 ]] || set -- core
want=()
for stage in "$@"; do
  case "$stage" in
    core) want+=("${CORE[@]}") ;;
    extras) want+=("${EXTRAS[@]}") ;;
    all) want+=("${ORDER[@]}") ;;
    *)
      [[ -n "${VERSION[$stage]:-}" ]] || { log "unknown stage $stage (core, extras, all or one of: ${ORDER[*]})"; exit 2; }
      want+=("$stage")
      ;;
  esac
done

t_start="$(now)"
log "go $(go env GOVERSION), GOMODCACHE=$(go env GOMODCACHE), GOCACHE=$(go env GOCACHE)"
bindir="$tools/bin"
for name in "${ORDER[@]}"; do
  [[ " ${want[*]} " == *" $name "* ]] || continue
  build_once "$name" "${VERSION[$name]}" "build_${name//-/_}"
  bindir+="-$name-${VERSION[$name]}"
done

# The bin directory is named by what it holds, so callers asking for other stages never share one.
mkdir -p "$bindir"
for name in "${ORDER[@]}"; do
  [[ " ${want[*]} " == *" $name "* ]] || continue
  dir="$tools/$name-${VERSION[$name]}"
  for f in "$dir"/bin/*; do [[ -e "$f" ]] && ln -sfn "$f" "$bindir/$(basename "$f")"; done
  case "$name" in
    lws) ln -sfn "$dir/crds" "$bindir/lws-crds" ;;
    gie-crds) ln -sfn "$dir/crds" "$bindir/crds" ;;
  esac
done
log "${want[*]} ready in $(($(now) - t_start))s"
echo "$bindir"
