#!/usr/bin/env bash
# Builds, or reuses, the real Kubernetes control plane the tests start: kube-apiserver and
# kubectl from k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3, each at the version
# pinned by the go.mod beside this script; and fetches the policy CRDs of
# sigs.k8s.io/network-policy-api by module version. Everything lands in one directory per
# set of versions, outside the work tree, so every checkout and CI run on a machine shares it:
#
#   ${PALISADE_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/palisade-testenv}/<versions>/
#     bin/{kube-apiserver,kubectl,etcd}  crds/*.yaml  VERSIONS
#
# The last line printed on stdout is `export PALISADE_TESTENV=<that directory>`; the tests
# read PALISADE_TESTENV (or find the same directory themselves). Progress goes to stderr.
# Needs Go (GOTOOLCHAIN=local: the installed toolchain, no download) and the Go module proxy.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"

# The one place each version is pinned is the go.mod of its module.
kube_version="$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$here/kube/go.mod")"
etcd_version="$(awk '$1=="require" && $2=="go.etcd.io/etcd/server/v3" {print $3}' "$here/etcd/go.mod")"
# shellcheck source=versions.env
. "$here/versions.env"
anp_crds_version="$ANP_CRDS_VERSION"
cnp_crds_version="$CNP_CRDS_VERSION"
[ -n "$kube_version" ] && [ -n "$etcd_version" ] || { echo "testenv: cannot read the pinned versions" >&2; exit 2; }

key="k8s-${kube_version}-etcd-${etcd_version}-npa-${anp_crds_version}-${cnp_crds_version}"
cache_root="${PALISADE_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/palisade-testenv}"
out="$cache_root/$key"

if [ -f "$out/VERSIONS" ] && [ -x "$out/bin/kube-apiserver" ] && [ -x "$out/bin/kubectl" ] && [ -x "$out/bin/etcd" ]; then
  echo "testenv: reusing $out" >&2
  echo "export PALISADE_TESTENV=$out"
  exit 0
fi

command -v go >/dev/null || { echo "testenv: Go is needed to build $key (https://go.dev/dl)" >&2; exit 2; }
mkdir -p "$cache_root"
# Build into a fresh directory and rename it into place, so a failed or concurrent build
# never leaves a half-filled cache entry behind.
stage="$(mktemp -d "$cache_root/.build-XXXXXX")"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/crds"
start=$SECONDS

# Stamp the versions the way the Kubernetes release build does, so `kubectl version` and
# the API server's /version report the pinned release and a clean tree.
minor="${kube_version#v1.}"; minor="${minor%%.*}"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done
echo "testenv: building kube-apiserver and kubectl $kube_version (several minutes, once)" >&2
(cd "$here/kube" && go build -trimpath -ldflags "$kube_ldflags" -o "$stage/bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)
echo "testenv: building etcd $etcd_version" >&2
# etcd's release build stamps the git commit; a module build has the module version.
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$etcd_version" \
  -o "$stage/bin/etcd" go.etcd.io/etcd/server/v3)

module_dir() { (cd "$here/etcd" && go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'); }
anp_dir="$(module_dir "sigs.k8s.io/network-policy-api@$anp_crds_version")"
cnp_dir="$(module_dir "sigs.k8s.io/network-policy-api@$cnp_crds_version")"
# The experimental channel: the standard one lacks fields Palisade understands.
cp "$anp_dir/config/crd/experimental/policy.networking.k8s.io_adminnetworkpolicies.yaml" \
   "$anp_dir/config/crd/experimental/policy.networking.k8s.io_baselineadminnetworkpolicies.yaml" \
   "$cnp_dir/config/crd/experimental/policy.networking.k8s.io_clusternetworkpolicies.yaml" "$stage/crds/"
chmod -R u+w "$stage/crds"

cat > "$stage/VERSIONS" <<VERSIONS
kubernetes $kube_version
etcd $etcd_version
network-policy-api $anp_crds_version (AdminNetworkPolicy, BaselineAdminNetworkPolicy v1alpha1, experimental channel)
network-policy-api $cnp_crds_version (ClusterNetworkPolicy v1alpha2, experimental channel)
go $(go env GOVERSION)
built $build_date in $((SECONDS - start)) s
VERSIONS
chmod 755 "$stage"
if mv -T "$stage" "$out" 2>/dev/null; then
  trap - EXIT
else
  echo "testenv: another build finished first; using it" >&2
fi
echo "testenv: ready in $out ($((SECONDS - start)) s)" >&2
echo "export PALISADE_TESTENV=$out"
