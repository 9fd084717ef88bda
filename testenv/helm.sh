#!/usr/bin/env bash
# Builds, or reuses, the real `helm` the chart tests run (helm.sh/helm/v3 at the version
# pinned by testenv/helm/go.mod), and fetches the prometheus-operator CRDs (PodMonitor,
# ServiceMonitor) of the release pinned in testenv/helm/versions.env, against which the
# tests dry-run the chart's monitors. Everything lands in one directory per set of
# versions, outside the work tree, beside testenv/build.sh's:
#
#   ${PALISADE_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/palisade-testenv}/helm-<versions>/
#     bin/helm  crds/*.yaml  VERSIONS
#
# The last line printed on stdout is `export PALISADE_HELM=<that directory>`; the tests read
# PALISADE_HELM (or find the same directory themselves). Progress goes to stderr. Needs Go
# (GOTOOLCHAIN=local) and the Go module proxy; Go's build cache for helm is a temporary
# directory, removed afterwards.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"

helm_version="$(awk '$1=="require" && $2=="helm.sh/helm/v3" {print $3}' "$here/helm/go.mod")"
# shellcheck source=helm/versions.env
. "$here/helm/versions.env"
[ -n "$helm_version" ] && [ -n "${PROMETHEUS_OPERATOR_VERSION:-}" ] || { echo "testenv: cannot read the pinned helm versions" >&2; exit 2; }
key="helm-${helm_version}-promop-${PROMETHEUS_OPERATOR_VERSION}"
cache_root="${PALISADE_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/palisade-testenv}"
out="$cache_root/$key"

if [ -f "$out/VERSIONS" ] && [ -x "$out/bin/helm" ]; then
  echo "testenv: reusing $out" >&2
  echo "export PALISADE_HELM=$out"
  exit 0
fi

command -v go >/dev/null || { echo "testenv: Go is needed to build $key (https://go.dev/dl)" >&2; exit 2; }
mkdir -p "$cache_root"
stage="$(mktemp -d "$cache_root/.build-XXXXXX")"
trap 'chmod -R u+w "$stage" 2>/dev/null; rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/crds"
export GOCACHE="$stage/go-build"
start=$SECONDS
echo "testenv: building helm $helm_version (a few minutes, once)" >&2
(cd "$here/helm" && go build -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
  -o "$stage/bin/helm" helm.sh/helm/v3/cmd/helm)
rm -rf "$GOCACHE"

dir="$(cd "$here/helm" && go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
cp "$dir/example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml" \
   "$dir/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" "$stage/crds/"
chmod -R u+w "$stage/crds"

cat > "$stage/VERSIONS" <<VERSIONS
helm $helm_version
prometheus-operator $PROMETHEUS_OPERATOR_VERSION (PodMonitor, ServiceMonitor CRDs)
go $(go env GOVERSION)
built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - start)) s
VERSIONS
chmod 755 "$stage"
if mv -T "$stage" "$out" 2>/dev/null; then
  trap - EXIT
else
  echo "testenv: another build finished first; using it" >&2
fi
echo "testenv: ready in $out ($((SECONDS - start)) s)" >&2
echo "export PALISADE_HELM=$out"
