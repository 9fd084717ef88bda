#!/usr/bin/env bash
# Runs each fuzz target for a bounded time and prints the executions per target.
#
#   fuzz/run.sh SECONDS [TARGET...]      (default: every target, 60 s each)
#
# Seed corpora are built by seed.py when missing. For each target, the kept regression
# inputs (regressions/TARGET/*) are replayed first ("pass" or "FAIL" in the last column),
# then the target is fuzzed with `cargo +nightly fuzz run TARGET -- -max_total_time=...`.
# A crash ends a libFuzzer run; the script records it (artifacts/TARGET/crash-*), drops the
# crashing input from the corpus if it was a seed, and resumes for the remaining time, so
# one finding does not hide the next. Needs the nightly toolchain and cargo-fuzz.
# Exits 1 when anything crashed or a regression input failed.
set -u
cd "$(dirname "$0")"
export LSAN_OPTIONS="suppressions=$PWD/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
secs=${1:-60}
shift || true
if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo +nightly fuzz list); fi
[ -d corpus ] || python3 seed.py >/dev/null
cargo +nightly fuzz build >/dev/null 2>&1 || { cargo +nightly fuzz build; exit 2; }
printf '%-12s %12s %8s %8s %s\n' target executions exec/s crashes regressions
status=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  reg=-
  if compgen -G "regressions/$t/*" >/dev/null; then
    reg=pass
    for input in regressions/"$t"/*; do
      if ! cargo +nightly fuzz run "$t" "$input" >"artifacts/$t.regressions.log" 2>&1; then
        reg=FAIL
        status=1
      fi
    done
  fi
  log="artifacts/$t.log"
  : >"$log"
  execs=0 crashes=0 left=$secs rounds=0
  while [ "$left" -gt 0 ] && [ "$rounds" -lt 10 ]; do
    rounds=$((rounds + 1))
    start=$(date +%s)
    round="artifacts/$t.round.log"
    cargo +nightly fuzz run "$t" "corpus/$t" -- \
      -max_total_time="$left" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="artifacts/$t/" >"$round" 2>&1
    rc=$?
    cat "$round" >>"$log"
    n=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$round" | tail -n1 | awk '{print $2}')
    [ -n "$n" ] || n=$(grep -oE '^#[0-9]+' "$round" | tail -n1 | tr -d '#')
    execs=$((execs + ${n:-0}))
    left=$((left - ($(date +%s) - start)))
    [ "$rc" -eq 0 ] && break
    crashes=$((crashes + 1))
    status=1
    artifact=$(grep -oE 'Test unit written to [^ ]+' "$round" | tail -n1 | awk '{print $5}')
    [ -n "$artifact" ] || break
    rm -f "corpus/$t/$(basename "$artifact" | sed -E 's/^[a-z-]+-//')"
  done
  rm -f "artifacts/$t.round.log"
  printf '%-12s %12s %8s %8s %s\n' "$t" "$execs" "$((execs / (secs > 0 ? secs : 1)))" "$crashes" "$reg"
done
exit $status
