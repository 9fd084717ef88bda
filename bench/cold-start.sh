#!/usr/bin/env bash
# A node's cold start (root): from starting `palisade agent` in a fresh network namespace
# to its first ruleset in force, for one node of a generated cluster: the process start,
# reading and decoding the manifests, building the evaluator, compiling the node's
# ruleset and loading it (see docs/performance.md). Prints one line per run with the
# agent's own breakdown of the first sync.
#
#   bench/cold-start.sh [PODS] [RUNS]      (default: 10000 pods, 2000 policies, 5 runs)
set -euo pipefail
cd "$(dirname "$0")/.."
pods=${1:-10000}
runs=${2:-5}
cargo build -q --release -p palisade-cli
P=$PWD/target/release/palisade
dir=$(mktemp -d)
ns=palisade-cold-start
cleanup() {
  pkill -f "agent --source dir:$dir" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
"$P" gen --pods "$pods" --policies $((pods / 5)) --mix all -o "$dir/gen" > /dev/null 2>&1
mkdir -p "$dir/watched"
cp "$dir"/gen/cluster/*.yaml "$dir"/gen/policies/*.yaml "$dir/watched/"
for run in $(seq 1 "$runs"); do
  ip netns del "$ns" 2>/dev/null || true
  ip netns add "$ns"
  ip netns exec "$ns" ip link set lo up
  log="$dir/agent.log"
  start=$(date +%s.%N)
  NO_COLOR=1 ip netns exec "$ns" "$P" agent --source "dir:$dir/watched" --node node-0 \
    --listen 127.0.0.1:9469 > "$log" 2>&1 &
  for _ in $(seq 1 1500); do
    grep -q "ruleset updated" "$log" && break
    sleep 0.01
  done
  pkill -f "agent --source dir:$dir" || true
  wait 2> /dev/null || true
  line=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -m1 "ruleset updated" || true)
  [ -n "$line" ] || { echo "run $run: no ruleset after 15 s"; cat "$log"; exit 1; }
  logged=$(date -d "$(echo "$line" | awk '{print $1}')" +%s.%N)
  conntrack=$(echo "$line" | grep -o 'conntrack_ms=[0-9]*' | cut -d= -f2)
  # The line is written after the conntrack pass that follows the commit.
  echo "run $run: $(python3 -c "print(round(($logged - $start) * 1000 - $conntrack))") ms from start" \
    "to the ruleset in force; $(echo "$line" | grep -o 'elapsed_ms=.*')"
done
