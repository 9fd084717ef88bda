#!/usr/bin/env bash
# Times Palisade and the policy analysers people use instead on the same inputs, in one run,
# and checks that their answers agree with Palisade's:
#
#   bench/compare-peers.sh                # generated clusters of 200, 1,000 and 5,000 pods + the examples
#   bench/compare-peers.sh 200 1000       # chosen sizes (the examples always run)
#   RUNS=3 PEER_TIMEOUT=300 bench/compare-peers.sh
#
# Inputs: `palisade gen --pods N --policies N/5 --seed 1`, NetworkPolicy only (`--mix np`) and
# with admin tiers (`--mix all`), and examples/xyz and examples/shop. A tool is given the
# kinds it reads: Cyclonus NetworkPolicies; netpol-analyzer and policy-assistant also
# AdminNetworkPolicy and BaselineAdminNetworkPolicy. No peer reads ClusterNetworkPolicy, so
# the admin-tier inputs leave it out, for Palisade too. Admin-tier inputs are run for the
# tools that read admin kinds.
#
# The question, per tool (its equivalent of `palisade matrix`):
#   palisade          matrix -o jsonl (every pod pair on every probed port: the full probe
#                     list) and matrix -o summary (grouped)
#   netpol-analyzer   netpolicy list --dirpath DIR -o json (allowed connections per pair of
#                     workloads, as port sets: grouped, and it answers every probe)
#   cyclonus          cyclonus analyze --mode probe --policy-path DIR --probe-path model.json
#   policy-assistant  policy-assistant analyze --mode probe ... (the same model)
#                     (a truth table per probed port and protocol: the full probe list; these
#                     tools have no grouped form)
# Each command runs under /usr/bin/time -v (wall time, maximum RSS), with a time limit
# (PEER_TIMEOUT seconds, default 600) and an address-space limit (PEER_MEM_GIB, default 8);
# the tools alternate per input, RUNS times (default 2). A peer that times out or fails on
# an input is not run again on it, nor on larger inputs of the same kind.
#
# Agreement: for inputs up to AGREE_MAX_PODS pods (default 1000), every probe a peer answers
# is compared with Palisade's verdict (bench/peers.py compare).
#
# Peers are installed by bench/install-peers.sh (see there for NETPOL_ANALYZER_GIT and
# NETWORK_POLICY_API_GIT); a peer that cannot be installed is reported and left out.
# Work files go to PEERS_WORK (default: a new directory under /tmp, removed at the end
# unless KEEP=1). Needs Python 3 with PyYAML, GNU time (/usr/bin/time) and timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
runs=${RUNS:-2}
peer_timeout=${PEER_TIMEOUT:-600}
mem_gib=${PEER_MEM_GIB:-8}
agree_max=${AGREE_MAX_PODS:-1000}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(200 1000 5000)

[ -x /usr/bin/time ] || { echo "compare-peers: GNU time (/usr/bin/time) is needed" >&2; exit 2; }
command -v timeout >/dev/null || { echo "compare-peers: timeout (coreutils) is needed" >&2; exit 2; }
python3 -c 'import yaml' 2>/dev/null || { echo "compare-peers: Python 3 with PyYAML is needed" >&2; exit 2; }

set +e
peers_env=$(bench/install-peers.sh)
rc=$?
set -e
[ $rc -eq 0 ] || [ $rc -eq 3 ] || { echo "compare-peers: installing the peers failed" >&2; exit 1; }
eval "$peers_env"

cargo build -q --release -p palisade-cli
palisade="${CARGO_TARGET_DIR:-$repo/target}/release/palisade"

work=${PEERS_WORK:-$(mktemp -d /tmp/palisade-peers-XXXXXX)}
mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
results=$work/results.tsv
agreement=$work/agreement.jsonl
: > "$results"
: > "$agreement"

# Inputs: name, pod count, mix (np | admin), source paths.
inputs=()
for pods in "${sizes[@]}"; do
  for mix in np all; do
    dir=$work/gen-$mix-$pods
    "$palisade" gen --pods "$pods" --policies $((pods / 5)) --seed 1 --mix "$mix" -o "$dir/src" >/dev/null 2>&1
    python3 bench/peers.py prepare "$dir/src/cluster" "$dir/src/policies" --out "$dir"
    rm -rf "$dir/src"
    inputs+=("gen-$mix-$pods")
  done
done
for ex in xyz shop; do
  python3 bench/peers.py prepare "examples/$ex" --out "$work/example-$ex"
  inputs+=("example-$ex")
done

view_of() { case $1 in gen-np-*) echo np ;; *) echo admin ;; esac; }
pods_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pods"])' "$work/$1/info.json"; }
family_of() { case $1 in gen-*) echo "${1%-*}" ;; *) echo "$1" ;; esac; }

# The command of TOOL FORM on INPUT (run from the input's directory).
command_of() {
  local tool=$1 form=$2 view
  view=$(view_of "$3")
  case $tool/$form in
    palisade/full) echo "$palisade matrix -f $view -o jsonl" ;;
    palisade/grouped) echo "$palisade matrix -f $view -o summary" ;;
    netpol-analyzer/grouped) echo "$PEER_NETPOL_ANALYZER list --dirpath $view -o json" ;;
    cyclonus/full) echo "$PEER_CYCLONUS analyze --mode probe --policy-path cyclonus/np --probe-path model.json" ;;
    policy-assistant/full) echo "$PEER_POLICY_ASSISTANT analyze --mode probe --policy-path cyclonus/$view --probe-path model.json" ;;
  esac
}

# Which tools answer INPUT: Cyclonus reads no admin kinds.
tools_for() {
  local t=(palisade/full palisade/grouped)
  [ -n "${PEER_NETPOL_ANALYZER:-}" ] && t+=(netpol-analyzer/grouped)
  [ -n "${PEER_CYCLONUS:-}" ] && [ "$(view_of "$1")" = np ] && t+=(cyclonus/full)
  [ -n "${PEER_POLICY_ASSISTANT:-}" ] && t+=(policy-assistant/full)
  echo "${t[@]}"
}

declare -A gave_up       # tool/family -> "timeout at N pods" etc.
declare -A gave_up_pods  # tool/family -> N

# run TOOL FORM INPUT RUN: one measured run; a line in results.tsv.
run() {
  local tool=$1 form=$2 input=$3 n=$4 cmd out status wall rss pods why
  pods=$(pods_of "$input")
  cmd=$(command_of "$tool" "$form" "$input")
  local fam
  fam=$tool/$(family_of "$input")
  if [ -n "${gave_up[$fam]:-}" ] && [ "$pods" -ge "${gave_up_pods[$fam]}" ]; then
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$input" "$pods" "$tool" "$form" "$n" "skipped (${gave_up[$tool/$(family_of "$input")]})" - - >> "$results"
    return
  fi
  out=$work/$input/$tool-$form.out
  # Palisade's full list is timed into /dev/null (at 5,000 pods it is 100 million lines);
  # the copy compared with the peers is written once, untimed, below.
  [ "$tool/$form" = palisade/full ] && out=/dev/null
  set +e
  (cd "$work/$input" && ulimit -v $((mem_gib * 1024 * 1024)) &&
    /usr/bin/time -v -o "$work/$input/$tool-$form.time" timeout "$peer_timeout" $cmd > "$out" 2> "$work/$input/$tool-$form.err")
  local rc=$?
  set -e
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$work/$input/$tool-$form.time")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/$input/$tool-$form.time")
  case $rc in
    0) status=ok ;;
    124) status="timeout (${peer_timeout} s)"; gave_up[$fam]="timed out at $pods pods"; gave_up_pods[$fam]=$pods ;;
    *) if grep -qi 'out of memory\|cannot allocate' "$work/$input/$tool-$form.err"; then
         status="out of memory (${mem_gib} GiB)"
       else
         # The first line that says what went wrong (Go tools add a stack trace after it).
         why=$(grep -m1 -i 'error\|fatal\|panic' "$work/$input/$tool-$form.err" || tail -n 1 "$work/$input/$tool-$form.err")
         status="failed (exit $rc: $(printf '%s' "$why" | tr '\t\n' '  ' | cut -c1-120))"
       fi
       gave_up[$fam]="$status at $pods pods"; gave_up_pods[$fam]=$pods ;;
  esac
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$input" "$pods" "$tool" "$form" "$n" "$status" "$wall" "$rss" >> "$results"
  echo "compare-peers: run $n $input $tool $form: $status ${wall} s ${rss} KiB" >&2
}

echo "compare-peers: palisade $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for n in $(seq 1 "$runs"); do
  for input in "${inputs[@]}"; do
    for tf in $(tools_for "$input"); do
      run "${tf%/*}" "${tf#*/}" "$input" "$n"
    done
  done
done
echo "compare-peers: load after the runs $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# Agreement: Palisade's full list once more, into a file, against each peer's last answer.
for input in "${inputs[@]}"; do
  [ "$(pods_of "$input")" -le "$agree_max" ] || continue
  (cd "$work/$input" && "$palisade" matrix -f "$(view_of "$input")" -o jsonl > palisade.jsonl)
  for tf in $(tools_for "$input"); do
    tool=${tf%/*}; form=${tf#*/}
    [ "$tool" != palisade ] || continue
    grep -q "^$input	[0-9]*	$tool	$form	[0-9]*	ok	" "$results" || continue
    python3 bench/peers.py compare "$tool" "$work/$input/palisade.jsonl" "$work/$input/$tool-$form.out" \
      --model "$work/$input/model.json" | sed "s/^{/{\"input\": \"$input\", /" >> "$agreement"
  done
  rm -f "$work/$input/palisade.jsonl"
done

python3 - "$results" "$agreement" <<'PY'
import collections, json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
agree = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
by = collections.defaultdict(list)  # (input, tool, form) -> [(run, status, wall, rss)]
pods = {}
for inp, n, tool, form, run, status, wall, rss in rows:
    pods[inp] = int(n)
    by[(inp, tool, form)].append((int(run), status, None if wall == "-" else float(wall), None if rss == "-" else int(rss)))

def rng(vals, fmt):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}-{fmt(hi)}"

secs = lambda v: f"{v:.2f}"
mib = lambda v: f"{v / 1024:.0f}"
ratio = lambda v: f"{v:,.0f}x" if v >= 10 else f"{v:.1f}x"
print()
print(f"{'input':<16} {'pods':>5} {'tool':<17} {'form':<8} {'wall s':<13} {'max RSS MiB':<12} {'peer/palisade full':<19} {'peer/palisade grouped':<21} status")
inputs = list(dict.fromkeys(r[0] for r in rows))
verdict = {}
for inp in inputs:
    pal = {f: {r: w for r, s, w, _ in by[(inp, "palisade", f)] if s == "ok"} for f in ("full", "grouped")}
    for (i, tool, form), runs in by.items():
        if i != inp:
            continue
        ok = [r for r in runs if r[1] == "ok"]
        status = "ok" if len(ok) == len(runs) else next(r[1] for r in runs if r[1] != "ok")
        ratios = {}
        if tool != "palisade":
            for f in ("full", "grouped"):
                rs = [w / pal[f][r] for r, s, w, _ in ok if r in pal[f] and pal[f][r] > 0]
                ratios[f] = rng(rs, ratio)
                if rs and pods[inp] >= 1000:
                    verdict.setdefault((inp, f), []).append(min(rs))
            if not ok and pods[inp] >= 1000:
                verdict.setdefault((inp, "full"), [])
        print(f"{inp:<16} {pods[inp]:>5} {tool:<17} {form:<8} {rng([r[2] for r in ok], secs):<13} "
              f"{rng([r[3] for r in ok], mib):<12} {ratios.get('full', ''):<19} {ratios.get('grouped', ''):<21} {status}")
print()
for (inp, f), rs in sorted(verdict.items()):
    if f != "full":
        continue
    fastest = min(rs) if rs else None
    print(f"target (>= 10x the fastest peer that finished, Palisade's full list) on {inp}: "
          + ("no peer finished" if fastest is None else f"{'met' if fastest >= 10 else 'MISSED'} ({ratio(fastest)} in the worst run)"))
print()
print(f"{'input':<16} {'tool':<17} {'probes answered':>16} {'agree':>12} {'disagree':>9}")
for a in agree:
    print(f"{a['input']:<16} {a['tool']:<17} {a['answered']:>16,} {a['agree']:>12,} {a['disagree']:>9,}")
    for e in a["examples"][:5]:
        print(f"    {e}")
PY
if [ -n "${KEEP:-}" ]; then echo "compare-peers: work files kept in $work" >&2; fi
