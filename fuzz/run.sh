#!/usr/bin/env bash
# Runs each fuzz target for a bounded time and prints the executions per target.
#
#   fuzz/run.sh SECONDS [TARGET...]      (default: every target, 60 s each)
#
# Seed corpora are built by seed.py when missing. Each target first re-runs its kept
# regression inputs (regressions/TARGET/*), then fuzzes for SECONDS in libFuzzer's fork
# mode, which keeps going after a crash, OOM or timeout so that one finding does not hide
# the next; findings land in artifacts/TARGET/. Needs the nightly toolchain and cargo-fuzz.
set -u
cd "$(dirname "$0")"
secs=${1:-60}
shift || true
if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo +nightly fuzz list); fi
[ -d corpus ] || python3 seed.py >/dev/null
cargo +nightly fuzz build >/dev/null 2>&1 || { cargo +nightly fuzz build; exit 2; }
printf '%-12s %12s %8s %14s %s\n' target executions exec/s "crash/oom/tmo" regressions
status=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  reg=-
  if compgen -G "regressions/$t/*" >/dev/null; then
    if cargo +nightly fuzz run "$t" regressions/"$t"/* >"artifacts/$t.regressions.log" 2>&1; then
      reg=pass
    else
      reg=FAIL
      status=1
    fi
  fi
  log="artifacts/$t.log"
  cargo +nightly fuzz run "$t" "corpus/$t" -- \
    -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="artifacts/$t/" >"$log" 2>&1
  execs=$(grep -oE '^#[0-9]+' "$log" | tail -n1 | tr -d '#')
  rate=$(( ${execs:-0} / (secs > 0 ? secs : 1) ))
  found=$(grep -oE 'oom/timeout/crash: [0-9]+/[0-9]+/[0-9]+' "$log" | tail -n1 | awk '{print $2}' \
    | awk -F/ '{print $3"/"$1"/"$2}')
  [ "${found:-0/0/0}" = 0/0/0 ] || status=1
  printf '%-12s %12s %8s %14s %s\n' "$t" "${execs:-?}" "$rate" "${found:-0/0/0}" "$reg"
done
exit $status
