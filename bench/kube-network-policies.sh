#!/usr/bin/env bash
# Palisade's agent and kube-network-policies (the upstream reference enforcer) side by side
# in the lab (root): the same node network namespace, the same real API server, one at a
# time. Builds kube-network-policies from its Go module (pinned; cached in
# ~/.cache/palisade-peers, nothing of it in this repository) and the control plane
# (testenv/build.sh), then runs the measurement and prints its numbers.
#
#   bench/kube-network-policies.sh            (0, 100 and 1,000 policies; 10 changes each)
#   PALISADE_PEERS_RULES=0,100,1000,10000 PALISADE_PEERS_ROUNDS=20 bench/kube-network-policies.sh
#
# kube-network-policies needs the kernel's nftables queue expression (CONFIG_NFT_QUEUE):
# without it the measurement says so and measures Palisade alone.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v1.1.1
cache=${PALISADE_PEERS_CACHE:-$HOME/.cache/palisade-peers}/kube-network-policies-$version
if [ ! -x "$cache/npa-v1alpha1" ]; then
  mkdir -p "$cache"
  echo "building kube-network-policies $version (NetworkPolicy, AdminNetworkPolicy, BaselineAdminNetworkPolicy) into $cache" >&2
  # It pins a network-policy-api pseudo-version that the checksum database does not list
  # (the module proxy serves it): the database is skipped for that one module.
  GOTOOLCHAIN=local CGO_ENABLED=0 GONOSUMDB=sigs.k8s.io/network-policy-api GOBIN="$cache" \
    go install "sigs.k8s.io/kube-network-policies/cmd/kube-network-policies/npa-v1alpha1@$version"
fi
eval "$(testenv/build.sh)"
export PALISADE_KNP="$cache/npa-v1alpha1"
cargo test --release -p palisade-cli --test agent_kube_real -- --ignored --nocapture \
  side_by_side_with_kube_network_policies 2>&1 |
  grep -E '^(conformance|latency|time to enforce|storm|established|kube-network-policies left out)|panicked|test result'
