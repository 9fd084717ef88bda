#!/usr/bin/env bash
# Two builds of palisade side by side, alternated back to back on the same inputs: wall time and
# peak memory of the CLI's heavy commands, then the criterion benchmarks and the agent's
# time-to-apply where both builds have them. Prints each measurement and the new/old ratio of
# the medians; timings on a shared machine are noisy, so read ratios, not absolute numbers.
#
#   bench/compare-builds.sh OLD_DIR NEW_DIR [ROUNDS]
#
# Each DIR holds `palisade` and optionally the bench binaries `engine` (criterion, the engine's
# eval/update/compile groups) and `time_to_apply` (the agent's, needs root). Build them with
#   cargo build --release -p palisade-cli
#   cargo bench -p palisade-engine --bench engine --no-run
#   cargo bench -p palisade-agent --bench time_to_apply --no-run
# and copy target/release/palisade and target/release/deps/{engine,time_to_apply}-<hash>.
set -euo pipefail
old="$(realpath "$1")"
new="$(realpath "$2")"
rounds="${3:-3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/palisade-builds.XXXXXX")"
trap 'rm -rf "$work"' EXIT

"$old/palisade" gen --pods 10000 --policies 2000 --mix all -o "$work/10k" >/dev/null 2>&1
"$old/palisade" gen --pods 100000 --policies 20000 --mix all -o "$work/100k" >/dev/null 2>&1

declare -A samples
# measure NAME ARGS...: one run of each build, old first on odd rounds and new first on even.
measure() {
  local name="$1" round="$2"
  shift 2
  local order=(old new)
  if [ $((round % 2)) -eq 0 ]; then order=(new old); fi
  for side in "${order[@]}"; do
    local dir="$old"
    if [ "$side" = new ]; then dir="$new"; fi
    local line
    /usr/bin/time -f '%e %M' -o "$work/time" "$dir/palisade" "$@" >/dev/null 2>&1 || true
    line="$(tail -1 "$work/time")"
    samples["$name/$side"]+="$line;"
    echo "  $name $side: ${line% *} s, ${line#* } KiB" >&2
  done
}

for round in $(seq 1 "$rounds"); do
  echo "round $round" >&2
  measure "matrix summary 10k" "$round" matrix -f "$work/10k/cluster" -f "$work/10k/policies" -o summary --force
  measure "matrix summary 100k" "$round" matrix -f "$work/100k/cluster" -f "$work/100k/policies" -o summary --force
  measure "compile --node 10k" "$round" compile --target nftables -f "$work/10k/cluster" -f "$work/10k/policies" --node node-1
  measure "lint 10k" "$round" lint -f "$work/10k/cluster" -f "$work/10k/policies" -o json
  measure "coverage 10k" "$round" coverage -f "$work/10k/cluster" -f "$work/10k/policies" -o json
done

# median FIELD SAMPLES: the median of field 1 (seconds) or 2 (KiB) of "s kib;" samples.
median() {
  tr ';' '\n' <<<"$2" | awk -v f="$1" 'NF { print $f }' | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}
printf '\n%-24s %10s %10s %7s %12s %12s %7s\n' command "old s" "new s" ratio "old KiB" "new KiB" ratio
for name in "matrix summary 10k" "matrix summary 100k" "compile --node 10k" "lint 10k" "coverage 10k"; do
  os="$(median 1 "${samples[$name/old]}")" ns="$(median 1 "${samples[$name/new]}")"
  om="$(median 2 "${samples[$name/old]}")" nm="$(median 2 "${samples[$name/new]}")"
  printf '%-24s %10s %10s %7.2f %12s %12s %7.2f\n' "$name" "$os" "$ns" "$(echo "$ns / $os" | bc -l)" \
    "$om" "$nm" "$(echo "$nm / $om" | bc -l)"
done

if [ -x "$old/engine" ] && [ -x "$new/engine" ]; then
  for round in 1 2; do
    for side in old new; do
      dir="$old"
      if [ "$side" = new ]; then dir="$new"; fi
      echo "== engine benchmarks, $side build, round $round"
      "$dir/engine" --bench '^(eval|update-one-pod|compile)' --warm-up-time 1 --measurement-time 3 2>/dev/null |
        grep -E '^[a-z]|time:'
    done
  done
fi

if [ -x "$old/time_to_apply" ] && [ -x "$new/time_to_apply" ] && [ "$(id -u)" = 0 ]; then
  for round in 1 2; do
    for side in old new; do
      dir="$old"
      if [ "$side" = new ]; then dir="$new"; fi
      echo "== agent time-to-apply at 10,000 pods, $side build, round $round"
      "$dir/time_to_apply" --bench 10000
    done
  done
fi
