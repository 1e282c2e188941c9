#!/usr/bin/env bash
# Builds the control-plane binaries used by the integration and e2e suites from
# the pinned Go modules beside this script, and caches them outside the checkout
# keyed by component version, so a later run (or another clone) reuses them.
#
# Usage: test/tools/build.sh [component...]   (default: all)
# Prints the directory holding the binaries on its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
JOBSET_VERSION=v0.12.0
LWS_VERSION=v0.9.0
cache="${BERTH_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/tools}"
bin="$cache/bin"
mkdir -p "$bin"

# lock NAME: hold NAME's lock until unlock. Several invocations may run at
# once — `make test` builds every component in the background while its
# first phases run, and each phase asks for what it needs — so each
# component has its own lock: one invocation builds it, the others wait for
# that component alone and then find it cached.
lock() {
  if command -v flock >/dev/null; then
    exec 9>"$cache/.build-$1.lock"
    flock 9
  fi
}
unlock() { exec 9>&-; }

kube_ldflags() {
  local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  local flags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}

# build NAME VERSION MODULE_DIR PACKAGE [LDFLAGS]: the binary is cached as
# NAME-VERSION-SUM, SUM a digest of the tools module's go.sum, so that a
# change of the libraries it is built with (say, aligned with berth's) is
# built anew instead of finding the old binary; NAME is then linked to it.
build() {
  local name="$1" version="$2" dir="$3" pkg="$4" ldflags="${5:--s -w}"
  local key
  key="$version-$(sha256sum "$here/$dir/go.sum" | cut -c1-8)"
  local out="$bin/$name-$key"
  if [[ -x "$out" ]]; then
    link "$name" "$key"
    return 0
  fi
  lock "$name-$key"
  if [[ -x "$out" ]]; then
    unlock
    link "$name" "$key"
    return 0
  fi
  echo "building $name $version (cached in $bin; first build only)" >&2
  local start=$SECONDS
  (cd "$here/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out.tmp.$$" "$pkg")
  mv "$out.tmp.$$" "$out"
  echo "built $name in $((SECONDS - start))s" >&2
  unlock
  link "$name" "$key"
}

# link NAME VERSION: a stable name next to the versioned binary, which is what
# KUBEBUILDER_ASSETS and the harness look for. It is replaced atomically and
# only when it changes, because a running plane may be exec'ing it.
link() {
  if [[ "$(readlink "$bin/$1" 2>/dev/null)" == "$1-$2" ]]; then
    return 0
  fi
  ln -sfn "$1-$2" "$bin/.$1.$$"
  mv -Tf "$bin/.$1.$$" "$bin/$1"
}

# kwok_stages: the Stage definitions the harness gives kwok, copied from the
# kwok module beside its binary (bin/kwok-stages-VERSION, linked as
# bin/kwok-stages). kwok's "fast" set plus the "general" pod-complete Stage:
#   node/fast/node-initialize                  new node -> Ready at once
#   node/heartbeat-with-lease/...               keep Ready nodes' status fresh
#                                               (leases renew via kwok's flag)
#   pod/fast/pod-ready                          bound pod -> Running + Ready at once
#   pod/general/pod-complete                    Job pod -> Succeeded after the
#       delay in its pod-complete.stage.kwok.x-k8s.io/delay and /jitter-delay
#       annotations (default 1-5 s): how tests give pods a run time
#   pod/fast/pod-delete                         deleting pod -> gone at once
kwok_stages() {
  local out="$bin/kwok-stages-$KWOK_VERSION"
  lock "kwok-stages-$KWOK_VERSION"
  if [[ ! -d "$out" ]]; then
    local src tmp
    src="$(cd "$here/kwok" && go mod download sigs.k8s.io/kwok && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
    tmp="$out.tmp.$$"
    mkdir -p "$tmp"
    for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
      pod/fast/pod-ready pod/general/pod-complete pod/fast/pod-delete; do
      install -m 0644 "$src/$f.yaml" "$tmp/"
    done
    mv -T "$tmp" "$out"
  fi
  unlock
  link kwok-stages "$KWOK_VERSION"
}

# operator_config NAME VERSION MODULE FILES...: the CRDs and webhook
# configurations an operator needs, copied from its module beside its binary
# (bin/NAME-config-VERSION-SUM, linked as bin/NAME-config), so the e2e suite
# installs exactly the manifests of the version it runs.
operator_config() {
  local name="$1" version="$2" module="$3"; shift 3
  # Keyed by the list of files too: a list that grows is copied anew.
  local key
  key="$version-$(echo "$*" | sha256sum | cut -c1-8)"
  local out="$bin/$name-config-$key"
  lock "$name-config-$key"
  if [[ ! -d "$out" ]]; then
    local src tmp
    src="$(cd "$here/$name" && go mod download "$module" && go list -m -f '{{.Dir}}' "$module")"
    tmp="$out.tmp.$$"
    mkdir -p "$tmp"
    for f in "$@"; do
      install -m 0644 "$src/$f" "$tmp/"
    done
    mv -T "$tmp" "$out"
  fi
  unlock
  link "$name-config" "$key"
}

components=("$@")
if [[ ${#components[@]} -eq 0 ]]; then
  components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok jobset lws)
fi
for c in "${components[@]}"; do
  case "$c" in
    etcd) build etcd "$ETCD_VERSION" etcd . ;;
    kube-apiserver|kube-controller-manager|kube-scheduler)
      build "$c" "$KUBE_VERSION" kube "k8s.io/kubernetes/cmd/$c" "$(kube_ldflags)" ;;
    kwok) build kwok "$KWOK_VERSION" kwok sigs.k8s.io/kwok/cmd/kwok; kwok_stages ;;
    # The JobSet and LeaderWorkerSet operators, for the e2e suite; their
    # CRDs and webhook manifests are copied next to them.
    jobset)
      build jobset "$JOBSET_VERSION" jobset sigs.k8s.io/jobset
      operator_config jobset "$JOBSET_VERSION" sigs.k8s.io/jobset \
        config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml config/components/webhook/manifests.yaml ;;
    lws)
      build lws "$LWS_VERSION" lws sigs.k8s.io/lws/cmd
      operator_config lws "$LWS_VERSION" sigs.k8s.io/lws \
        config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml \
        config/crd/bases/disaggregatedset.x-k8s.io_disaggregatedsets.yaml config/webhook/manifests.yaml ;;
    *) echo "unknown component $c" >&2; exit 2 ;;
  esac
done
echo "$bin"
