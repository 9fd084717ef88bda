#!/usr/bin/env bash
# Golden outputs: run one `palisade` binary over a fixed set of inputs and write every report to
# a directory, so that two builds can be compared byte for byte (`diff -r OLD NEW`).
#
#   bench/golden.sh BINARY OUTDIR [--big]
#
# Inputs: the bundled examples, 20 generated clusters (200 pods, NetworkPolicy-only and with
# admin tiers, seeds 1-10 each) and, with --big, a 10,000-pod / 2,000-policy cluster. Outputs per
# input: `matrix -o jsonl` and `-o summary`, `diff` against a second policy set, `lint -o json`,
# `coverage -o json`, `compile --target nftables` for every node and `--target neutron`.
# Each command's stdout, stderr and exit status are recorded; nothing is filtered.
set -euo pipefail
bin="$(realpath "$1")"
out="$2"
big="${3:-}"
here="$(cd "$(dirname "$0")/.." && pwd)"
inputs="$(mktemp -d "${TMPDIR:-/tmp}/palisade-golden.XXXXXX")"
trap 'rm -rf "$inputs"' EXIT
rm -rf "$out"
mkdir -p "$out"

# run NAME ARGS...: records stdout, stderr and the exit status of `palisade ARGS...`.
run() {
  local name="$1"
  shift
  set +e
  "$bin" "$@" >"$out/$name.out" 2>"$out/$name.err"
  echo "$?" >"$out/$name.rc"
  set -e
}

# reports NAME FILES... -- NEWFILES...: every report for one input, and a diff to the new files.
reports() {
  local name="$1"
  shift
  local files=() new=()
  while [ "$1" != "--" ]; do files+=(-f "$1"); shift; done
  shift
  new=("$@")
  run "$name.matrix.jsonl" matrix "${files[@]}" -o jsonl --force
  run "$name.matrix.summary" matrix "${files[@]}" -o summary --force
  run "$name.lint" lint "${files[@]}" -o json
  run "$name.coverage" coverage "${files[@]}" -o json
  run "$name.neutron" compile --target neutron "${files[@]}"
  run "$name.nftables" compile --target nftables "${files[@]}"
  if [ ${#new[@]} -gt 0 ]; then
    run "$name.diff" diff "${files[@]}" --to "${new[@]}" -o json
    run "$name.diff.text" diff "${files[@]}" --to "${new[@]}"
  fi
}

reports xyz "$here/examples/xyz" -- "$here/examples/xyz/cluster.yaml"
reports shop "$here/examples/shop" --

for mix in np all; do
  for seed in $(seq 1 10); do
    "$bin" gen --pods 200 --policies 40 --seed "$seed" --mix "$mix" -o "$inputs/$mix-$seed" >/dev/null 2>&1
    "$bin" gen --pods 200 --policies 40 --seed "$((seed + 100))" --mix "$mix" -o "$inputs/$mix-$seed-b" >/dev/null 2>&1
    reports "gen-$mix-$seed" "$inputs/$mix-$seed/cluster" "$inputs/$mix-$seed/policies" -- \
      "$inputs/$mix-$seed/cluster" "$inputs/$mix-$seed-b/policies"
  done
done

if [ "$big" = "--big" ]; then
  "$bin" gen --pods 10000 --policies 2000 --mix all -o "$inputs/big" >/dev/null 2>&1
  "$bin" gen --pods 10000 --policies 2000 --seed 2 --mix all -o "$inputs/big-b" >/dev/null 2>&1
  files=(-f "$inputs/big/cluster" -f "$inputs/big/policies")
  run big.matrix.summary matrix "${files[@]}" -o summary --force
  run big.lint lint "${files[@]}" -o json
  run big.coverage coverage "${files[@]}" -o json
  run big.nftables compile --target nftables "${files[@]}" --node node-1
  run big.diff diff "${files[@]}" --to "$inputs/big/cluster" "$inputs/big-b/policies" -o json
fi
# Temporary directories and the checkout appear in messages; name them alike in every run.
sed -i "s#$inputs#INPUTS#g; s#$here#REPO#g" "$out"/*
echo "golden outputs of $bin: $(ls "$out" | wc -l) files in $out" >&2
