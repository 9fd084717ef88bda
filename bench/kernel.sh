#!/usr/bin/env bash
# Kernel benchmarks (root): new-connection latency between two lab pods with 0, 100, 1,000
# and 10,000 policy rules loaded (rules selecting other pods), palisade's ruleset (verdict
# maps to per-class chains) against the same rules as one linear list; then compile + load
# time, memory and script size for generated clusters of 1,000 and 10,000 pods, every pod
# local and one node's pods.
#
#   bench/kernel.sh [RULE COUNTS...]     (default: 0 100 1000 10000; SKIP_APPLY=1: latency only)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p palisade-cli
P=$PWD/target/release/palisade
out=bench/out/kernel
mkdir -p "$out"
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(0 100 1000 10000)
python3 - "$out" "${counts[@]}" <<'PY'
import sys
out, counts = sys.argv[1], [int(c) for c in sys.argv[2:]]
pod = lambda name, ip, labels: f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: bench, labels: {{{labels}}}}}
spec: {{containers: [{{name: c, ports: [{{containerPort: 80}}]}}]}}
status: {{podIP: {ip}}}
"""
small = "apiVersion: v1\nkind: Namespace\nmetadata: {name: bench}\n" + pod("zz-a", "10.50.0.1", "app: a") + pod("zz-b", "10.50.0.2", "app: b")
open(f"{out}/small.yaml", "w").write(small)
for n in counts:
    text = small
    for i in range(n):
        text += pod(f"o-{i}", f"10.60.{i // 250}.{i % 250 + 1}", f"app: o{i}")
        text += f"""---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: np-{i}, namespace: bench}}
spec:
  podSelector: {{matchLabels: {{app: o{i}}}}}
  ingress: [{{from: [{{ipBlock: {{cidr: 10.70.{i // 250}.{i % 250 + 1}/32}}}}], ports: [{{port: 8080}}]}}]
"""
    open(f"{out}/rules-{n}.yaml", "w").write(text)
PY
$P lab down --name bk >/dev/null 2>&1 || true
$P lab up -f "$out/small.yaml" --name bk 2>/dev/null
trap '$P lab down --name bk >/dev/null 2>&1 || true' EXIT
echo "new-connection latency zz-a -> zz-b:80, one client, 1.5 s per cell (conn_per_s = 1 / mean connect time)"
printf '%-8s %-8s %-10s %-12s %-10s %-10s %s\n' rules layout nft_rules conn_per_s p50_us p99_us timeouts
for n in "${counts[@]}"; do
  for layout in nft linear; do
    $P compile --target nftables -f "$out/rules-$n.yaml" -o "$layout" 2>/dev/null | grep -v '^#' > "$out/ruleset-$n-$layout.nft"
    ip netns exec bk-node nft -f "$out/ruleset-$n-$layout.nft"
    rules=$(ip netns exec bk-node nft list table inet palisade | grep -cE '^\s+(ip|ip6|meta|th|counter|goto|return|drop|accept)')
    ip netns exec bk-node conntrack -F >/dev/null 2>&1 || true    # a full conntrack table would skew later cells
    ip netns exec bk-p0 "$P" lab connect-bench --to 10.50.0.2:80 --millis 300 >/dev/null   # warm up
    ip netns exec bk-node conntrack -F >/dev/null 2>&1 || true
    read -r _ conns _ timeouts _ rate _ p50 _ p99 < <(ip netns exec bk-p0 "$P" lab connect-bench --to 10.50.0.2:80 --millis 1500)
    printf '%-8s %-8s %-10s %-12s %-10s %-10s %s\n' "$n" "$layout" "$rules" "$rate" "$p50" "$p99" "$timeouts"
  done
done
[ -z "${SKIP_APPLY:-}" ] || exit 0
echo
echo "compile + load (generated clusters, policies = pods / 5, --mix all; wall times include"
echo "process start and YAML load; nft peak RSS from /usr/bin/time; fresh network namespace)"
printf '%-8s %-9s %-8s %-11s %-10s %-10s %-10s %-8s %-8s\n' pods policies node compile_s compile_MB load_s nft_MB script_MB chains
for pods in 1000 10000; do
  dir=$out/gen-$pods
  [ -d "$dir" ] || $P gen --pods "$pods" --policies $((pods / 5)) --mix all -o "$dir" >/dev/null 2>&1
  for node in all node-0; do
    args=(); [ "$node" = all ] || args=(--node "$node")
    /usr/bin/time -o "$dir/compile.time" -f '%e %M' \
      $P compile --target nftables -f "$dir/cluster" -f "$dir/policies" "${args[@]}" > "$dir/ruleset-$node.nft"
    grep -v '^#' "$dir/ruleset-$node.nft" > "$dir/script-$node.nft"
    chains=$($P compile --target nftables -f "$dir/cluster" -f "$dir/policies" "${args[@]}" --stats | awk '/^chains:/ {print $2}')
    ip netns add bk-apply
    /usr/bin/time -o "$dir/load.time" -f '%e %M' ip netns exec bk-apply nft -f "$dir/script-$node.nft"
    ip netns del bk-apply
    read -r cs ckb < "$dir/compile.time"
    read -r ls lkb < "$dir/load.time"
    bytes=$(stat -c %s "$dir/script-$node.nft")
    printf '%-8s %-9s %-8s %-11s %-10s %-10s %-10s %-8s %-8s\n' "$pods" $((pods / 5)) "$node" "$cs" $((ckb / 1024)) "$ls" $((lkb / 1024)) \
      "$(python3 -c "print(f'{$bytes / 1e6:.2f}')")" "$chains"
  done
done
