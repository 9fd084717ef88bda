#!/usr/bin/env bash
# `matrix -o html` at cluster scale: the page's size, the wall and user time and the peak
# RSS of writing it, then headless Chromium's time to render it and to open one cell's
# explanation (the page records both in data-rendered-ms and data-explained-ms, in ms
# since navigation start). A benchmark, not a test: the numbers go to docs/performance.md.
#
#   bench/html.sh [PODS] [RUNS] [OTHER_BINARY]
#
# Default: 10,000 pods, 2,000 policies (`gen --mix all`), 3 runs. With OTHER_BINARY (an
# older `palisade`), each run writes the page with it and then with this tree's build,
# alternating, so both see the same load on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."
pods=${1:-10000}
runs=${2:-3}
other=${3:-}
cargo build -q --release -p palisade-cli
P=$PWD/target/release/palisade
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$P" gen --pods "$pods" --policies $((pods / 5)) --mix all -o "$dir/gen" > /dev/null 2>&1
page() { # BINARY LABEL
  /usr/bin/time -f '%e %U %M' -o "$dir/time" \
    "$1" matrix -f "$dir/gen/cluster" -f "$dir/gen/policies" -o html > "$dir/page.html" 2> /dev/null
  read -r wall user rss < "$dir/time"
  printf '%-6s page %6.1f MB  wall %6.2f s  user %6.2f s  max RSS %5d MB' "$2" \
    "$(echo "$(stat -c %s "$dir/page.html") / 1000000" | bc -l)" "$wall" "$user" $((rss / 1024))
}
browser() { # prints the render and explanation times of the last page written
  local dom
  dom=$(timeout 300 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --dump-dom "file://$dir/page.html#explain=0,0,0" 2> /dev/null)
  printf '  chromium: rendered %s ms, explained %s ms, %s cells in the DOM\n' \
    "$(grep -o 'data-rendered-ms="[0-9.]*"' <<< "$dom" | grep -o '[0-9.]*' || echo '?')" \
    "$(grep -o 'data-explained-ms="[0-9.]*"' <<< "$dom" | grep -o '[0-9.]*' || echo '?')" \
    "$(grep -o '<td ' <<< "$dom" | wc -l)"
}
echo "matrix -o html: $pods pods, $((pods / 5)) policies, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
for run in $(seq 1 "$runs"); do
  if [ -n "$other" ]; then
    page "$other" before
    echo
  fi
  page "$P" after
  browser
done
