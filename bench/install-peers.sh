#!/usr/bin/env bash
# Installs, or reuses, the policy analysers bench/compare-peers.sh measures Palisade against,
# each built by Go module name at a pinned version, into a cache outside the work tree:
#
#   ${PALISADE_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/palisade-peers}/<tool>-<version>/
#     bin/<command>  VERSION
#
#   bench/install-peers.sh            # all three
#   bench/install-peers.sh cyclonus   # one (cyclonus | netpol-analyzer | policy-assistant)
#
# - Cyclonus: `go install github.com/mattfenwick/cyclonus/cmd/cyclonus@v0.5.6`.
# - netpol-analyzer (command `netpolicy`): `go install
#   github.com/np-guard/netpol-analyzer/cmd/netpolicy@v1.4.4`; where the proxy refuses the
#   module's version list (which `go install` reads) but serves v1.4.4, `go mod download` of
#   that version (checked against the checksum database) and `go build ./cmd/netpolicy` in
#   it. Where the proxy refuses v1.4.4 too, set NETPOL_ANALYZER_GIT to a git clone of
#   github.com/np-guard/netpol-analyzer: the script builds tag v1.4.4 from it (the commit is
#   checked) with its go.sum, its dependencies from the proxy.
# - policy-assistant (module sigs.k8s.io/network-policy-api/policy-assistant, directory
#   cmd/policy-assistant): the module has no version of its own, so the proxy cannot serve
#   it; set NETWORK_POLICY_API_GIT to a git clone of github.com/kubernetes-sigs/network-policy-api
#   and the script builds the pinned commit below from it.
#
# A tool that cannot be installed is reported with the reason; the others are still
# installed. Exit status: 0 all requested tools ready, 3 some missing (reasons on stderr),
# 2 no Go. The last lines on stdout are `export PEER_<TOOL>=<binary>` for each ready tool.
# Needs Go (GOTOOLCHAIN=local: the installed toolchain, no download) and the Go module proxy.
# Go's build cache goes to a temporary directory that is removed afterwards (PEERS_GOCACHE:
# a build cache to use and keep instead).
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"

# The pins: one place.
CYCLONUS_MODULE=github.com/mattfenwick/cyclonus
CYCLONUS_VERSION=v0.5.6
NPA_MODULE=github.com/np-guard/netpol-analyzer
NPA_VERSION=v1.4.4
NPA_COMMIT=49264ddb8ecaa2012f78fe56c55adeb509af3bb7
PA_MODULE=sigs.k8s.io/network-policy-api/policy-assistant
PA_COMMIT=0eec1b0e5fa92715b4c0f4c48d3c8d2913ed2159

cache_root="${PALISADE_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/palisade-peers}"
command -v go >/dev/null || { echo "install-peers: Go is needed (https://go.dev/dl)" >&2; exit 2; }
mkdir -p "$cache_root"
stage=""
if [ -n "${PEERS_GOCACHE:-}" ]; then
  export GOCACHE="$PEERS_GOCACHE"
  cleanup() { [ -z "$stage" ] || rm -rf "$stage"; }
else
  GOCACHE="$(mktemp -d "${TMPDIR:-/tmp}/palisade-peers-gocache-XXXXXX")"
  export GOCACHE
  cleanup() { [ -z "$stage" ] || rm -rf "$stage"; go clean -cache >/dev/null 2>&1 || true; rm -rf "$GOCACHE"; }
fi
trap cleanup EXIT

tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(cyclonus netpol-analyzer policy-assistant)
missing=()
exports=()

# ready DIR COMMAND: the cached entry is complete.
ready() { [ -f "$1/VERSION" ] && [ -x "$1/bin/$2" ]; }

# begin DIR: a fresh staging directory next to DIR (renamed into place by `commit`), so a
# failed or concurrent build never leaves a half-filled entry.
begin() { stage="$(mktemp -d "$cache_root/.build-XXXXXX")"; mkdir -p "$stage/bin"; }
commit() {
  local out=$1 what=$2
  printf '%s\ngo %s\nbuilt %s\n' "$what" "$(go env GOVERSION)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$stage/VERSION"
  chmod 755 "$stage"
  mv -T "$stage" "$out" 2>/dev/null || echo "install-peers: another build of $out finished first; using it" >&2
  rm -rf "$stage"; stage=""
}

# from_git GITDIR COMMIT SUBDIR: extracts SUBDIR of COMMIT from a git directory into $stage/src.
from_git() {
  local git=$1 rev=$2 sub=$3
  git -C "$git" cat-file -e "$rev^{commit}" 2>/dev/null || return 1
  mkdir -p "$stage/src"
  git -C "$git" archive "$rev" $sub | tar -x -C "$stage/src"
}

install_cyclonus() {
  local out="$cache_root/cyclonus-$CYCLONUS_VERSION"
  ready "$out" cyclonus && { exports+=("PEER_CYCLONUS=$out/bin/cyclonus"); return; }
  echo "install-peers: go install $CYCLONUS_MODULE/cmd/cyclonus@$CYCLONUS_VERSION" >&2
  begin
  if GOBIN="$stage/bin" go install -trimpath "$CYCLONUS_MODULE/cmd/cyclonus@$CYCLONUS_VERSION" >&2; then
    commit "$out" "$CYCLONUS_MODULE $CYCLONUS_VERSION (go install)"
    exports+=("PEER_CYCLONUS=$out/bin/cyclonus")
  else
    missing+=("cyclonus: go install $CYCLONUS_MODULE/cmd/cyclonus@$CYCLONUS_VERSION failed (above)")
  fi
}

# module_dir MODULE@VERSION: downloads a module through the proxy (checked against the
# checksum database) and prints its directory in the module cache.
module_dir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }

install_npa() {
  local out="$cache_root/netpol-analyzer-$NPA_VERSION" dir
  ready "$out" netpolicy && { exports+=("PEER_NETPOL_ANALYZER=$out/bin/netpolicy"); return; }
  echo "install-peers: go install $NPA_MODULE/cmd/netpolicy@$NPA_VERSION" >&2
  begin
  if GOBIN="$stage/bin" go install -trimpath "$NPA_MODULE/cmd/netpolicy@$NPA_VERSION" >&2; then
    commit "$out" "$NPA_MODULE $NPA_VERSION (go install)"
  # `go install pkg@version` also reads the module's version list (for deprecations); a
  # proxy that refuses the list but serves the version still lets it be built in place.
  elif dir="$(module_dir "$NPA_MODULE@$NPA_VERSION" 2>/dev/null)" && [ -n "$dir" ]; then
    echo "install-peers: the module proxy refuses the version list of $NPA_MODULE but serves $NPA_VERSION; building it from the module cache" >&2
    (cd "$dir" && go build -trimpath -o "$stage/bin/netpolicy" ./cmd/netpolicy) >&2 \
      && commit "$out" "$NPA_MODULE $NPA_VERSION (go mod download + go build ./cmd/netpolicy)" \
      || { missing+=("netpol-analyzer: the build of $NPA_VERSION in $dir failed (above)"); rm -rf "$stage"; stage=""; return; }
  elif [ -n "${NETPOL_ANALYZER_GIT:-}" ]; then
    echo "install-peers: the module proxy does not serve $NPA_MODULE@$NPA_VERSION; building it ($NPA_COMMIT) from $NETPOL_ANALYZER_GIT" >&2
    local rev
    rev="$(git -C "$NETPOL_ANALYZER_GIT" rev-parse "$NPA_VERSION^{commit}" 2>/dev/null || true)"
    if [ "$rev" != "$NPA_COMMIT" ]; then
      missing+=("netpol-analyzer: tag $NPA_VERSION in $NETPOL_ANALYZER_GIT is '${rev:-absent}', not $NPA_COMMIT")
      rm -rf "$stage"; stage=""; return
    fi
    from_git "$NETPOL_ANALYZER_GIT" "$NPA_COMMIT" "" \
      && (cd "$stage/src" && go build -trimpath -o "$stage/bin/netpolicy" ./cmd/netpolicy) >&2 \
      && rm -rf "$stage/src" \
      && commit "$out" "$NPA_MODULE $NPA_VERSION (commit $NPA_COMMIT, built from git; dependencies from the module proxy)" \
      || { missing+=("netpol-analyzer: the build of $NPA_VERSION from $NETPOL_ANALYZER_GIT failed (above)"); rm -rf "$stage"; stage=""; return; }
  else
    missing+=("netpol-analyzer: the module proxy refuses $NPA_MODULE@$NPA_VERSION; set NETPOL_ANALYZER_GIT to a clone of github.com/np-guard/netpol-analyzer")
    rm -rf "$stage"; stage=""; return
  fi
  exports+=("PEER_NETPOL_ANALYZER=$out/bin/netpolicy")
}

install_pa() {
  local out="$cache_root/policy-assistant-${PA_COMMIT:0:12}"
  ready "$out" policy-assistant && { exports+=("PEER_POLICY_ASSISTANT=$out/bin/policy-assistant"); return; }
  if [ -z "${NETWORK_POLICY_API_GIT:-}" ]; then
    missing+=("policy-assistant: $PA_MODULE has no published version (the proxy answers 404 for its version list and 403 for commits); set NETWORK_POLICY_API_GIT to a clone of github.com/kubernetes-sigs/network-policy-api")
    return
  fi
  echo "install-peers: building $PA_MODULE at $PA_COMMIT from $NETWORK_POLICY_API_GIT" >&2
  begin
  from_git "$NETWORK_POLICY_API_GIT" "$PA_COMMIT" cmd/policy-assistant \
    && (cd "$stage/src/cmd/policy-assistant" && go build -trimpath -o "$stage/bin/policy-assistant" ./cmd/policy-assistant) >&2 \
    && rm -rf "$stage/src" \
    && commit "$out" "$PA_MODULE (network-policy-api commit $PA_COMMIT, built from git; dependencies from the module proxy)" \
    || { missing+=("policy-assistant: commit $PA_COMMIT absent from $NETWORK_POLICY_API_GIT, or its build failed (above)"); rm -rf "$stage"; stage=""; return; }
  exports+=("PEER_POLICY_ASSISTANT=$out/bin/policy-assistant")
}

for tool in "${tools[@]}"; do
  case $tool in
    cyclonus) install_cyclonus ;;
    netpol-analyzer) install_npa ;;
    policy-assistant) install_pa ;;
    *) echo "install-peers: unknown tool '$tool' (cyclonus | netpol-analyzer | policy-assistant)" >&2; exit 2 ;;
  esac
done
for m in "${missing[@]}"; do echo "install-peers: NOT INSTALLED: $m" >&2; done
for e in "${exports[@]}"; do echo "export $e"; done
[ ${#missing[@]} -eq 0 ] || exit 3
