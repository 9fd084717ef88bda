#!/usr/bin/env bash
# Times network-config-analyzer and `palisade matrix` on the same generated
# NetworkPolicy-only clusters, in the same run, and prints the ratio per size.
#
#   bench/compare-nca.sh              # 200, 500, 1000 and 2000 pods (NCA needs ~12 min in all)
#   bench/compare-nca.sh 200 1000     # chosen sizes
#   DISTINCT=1 bench/compare-nca.sh 1000   # every pod labelled apart (gen --distinct-labels)
#
# Policies per size: 200->40, 500->100, 1000->200, 2000->500 (others: pods/5).
# NCA is installed from PyPI into $NCA_VENV (default /tmp/nca-venv) on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${NCA_VENV:-/tmp/nca-venv}
gen_flags=()
mode=np
if [ -n "${DISTINCT:-}" ]; then
  gen_flags=(--distinct-labels)
  mode=distinct
fi
if [ ! -x "$venv/bin/nca" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q network-config-analyzer
fi
cargo build -q --release -p palisade-cli
palisade=target/release/palisade
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(200 500 1000 2000)
out=bench/out
mkdir -p "$out"
now() { echo "$EPOCHREALTIME"; }
nca_version=$("$venv/bin/pip" show network-config-analyzer 2>/dev/null | awk '/^Version/ {print $2}')
echo "network-config-analyzer $nca_version; palisade $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $(nproc) cores"
printf '%-6s %-9s %-10s %-18s %-18s %-14s %s\n' pods policies nca_s palisade_summary_s palisade_jsonl_s ratio_summary ratio_jsonl
for pods in "${sizes[@]}"; do
  case $pods in
    200) policies=40 ;; 500) policies=100 ;; 1000) policies=200 ;; 2000) policies=500 ;; *) policies=$((pods / 5)) ;;
  esac
  dir=$out/$mode-$pods
  rm -rf "$dir"
  $palisade gen --pods "$pods" --policies "$policies" --seed 1 --mix np "${gen_flags[@]}" -o "$dir" 2>/dev/null
  t0=$(now)
  "$venv/bin/nca" --connectivity "$dir/policies" --pod_list "$dir/.nca/pods.yaml" --ns_list "$dir/.nca/namespaces.yaml" > "$dir/nca.out" 2>&1
  t1=$(now)
  # Grouped output, like NCA's connectivity map ...
  $palisade matrix -f "$dir/cluster" -f "$dir/policies" -o summary > "$dir/palisade.summary"
  t2=$(now)
  # ... and every pod pair on every container port, one JSON line each (much more output).
  $palisade matrix -f "$dir/cluster" -f "$dir/policies" -o jsonl > "$dir/palisade.jsonl"
  t3=$(now)
  python3 - "$pods" "$policies" "$t0" "$t1" "$t2" "$t3" <<'PY'
import sys
pods, policies = sys.argv[1:3]
t0, t1, t2, t3 = map(float, sys.argv[3:7])
nca, summary, jsonl = t1 - t0, t2 - t1, t3 - t2
print(f"{pods:<6} {policies:<9} {nca:<10.2f} {summary:<18.4f} {jsonl:<18.4f} {nca / summary:<14.0f} {nca / jsonl:.0f}")
PY
done
