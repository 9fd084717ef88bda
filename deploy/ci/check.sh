#!/usr/bin/env bash
# The steps of the Palisade CI check (the composite action `action.yml` runs them; any CI
# can). `palisade` must be on PATH. Settings come from the environment:
#
#   PALISADE_PATHS     the manifests, space-separated, as for `palisade -f` (required)
#   PALISADE_FAIL_ON   lint severity that fails the check: error|warning|info|none (default error)
#   PALISADE_SARIF     where `lint` writes its SARIF log (default palisade.sarif)
#   PALISADE_BASE      git ref the `diff` step compares the working tree with
#   PALISADE_MD        where `diff` writes its Markdown report (default palisade-diff.md)
#
#   check.sh lint      SARIF log for code scanning; prints findings; `findings=<exit status>`
#                      to $GITHUB_OUTPUT (3: findings at PALISADE_FAIL_ON). Never fails on
#                      findings itself: the SARIF log is uploaded first (see `verdict`).
#   check.sh diff      the Markdown report of what changes against PALISADE_BASE, headed by
#                      a marker line the comment step finds it by; `changed=true|false`.
#   check.sh comment   posts (or updates) the report as a pull-request comment, with `gh`
#                      (GH_TOKEN, GITHUB_REPOSITORY, PALISADE_PR).
#   check.sh verdict   fails when `lint` found findings at PALISADE_FAIL_ON.
set -euo pipefail
marker='<!-- palisade-diff -->'
out="${GITHUB_OUTPUT:-/dev/null}"
sarif="${PALISADE_SARIF:-palisade.sarif}"
md="${PALISADE_MD:-palisade-diff.md}"
read -ra paths <<< "${PALISADE_PATHS:?PALISADE_PATHS: the manifests to check, space-separated}"
[ "${#paths[@]}" -gt 0 ] || { echo "PALISADE_PATHS is empty" >&2; exit 2; }

case "${1:-}" in
lint)
  fail_on=(--fail-on "${PALISADE_FAIL_ON:-error}")
  [ "${PALISADE_FAIL_ON:-error}" = none ] && fail_on=()
  # The SARIF log for code scanning, then the same findings as text in the log.
  status=0
  palisade lint -f "${paths[@]}" -o sarif "${fail_on[@]}" > "$sarif" || status=$?
  if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then exit "$status"; fi
  palisade lint -f "${paths[@]}" || true
  echo "findings=$status" >> "$out"
  ;;
diff)
  base="${PALISADE_BASE:?PALISADE_BASE: the git ref to compare with}"
  status=0
  { echo "$marker"; echo "#### Palisade: connections changed against \`$base\`"; echo;
    palisade diff -f "${paths[@]}" --base "$base" -o md || status=$?; } > "$md.tmp"
  case "$status" in
    0) { echo "$marker"; echo "#### Palisade: no connection changes against \`$base\`"; } > "$md"
       rm -f "$md.tmp"; echo "changed=false" >> "$out" ;;
    3) mv "$md.tmp" "$md"; echo "changed=true" >> "$out" ;;
    *) rm -f "$md.tmp"; exit "$status" ;;
  esac
  cat "$md"
  ;;
comment)
  : "${PALISADE_PR:?PALISADE_PR: the pull request number}" "${GITHUB_REPOSITORY:?}"
  api="repos/$GITHUB_REPOSITORY/issues"
  id="$(gh api "$api/$PALISADE_PR/comments" --paginate \
    --jq ".[] | select(.body | startswith(\"$marker\")) | .id" | head -n1)"
  if [ -n "$id" ]; then
    gh api -X PATCH "$api/comments/$id" -F "body=@$md" > /dev/null
  else
    gh api "$api/$PALISADE_PR/comments" -F "body=@$md" > /dev/null
  fi
  ;;
verdict)
  findings="${2:-0}"
  if [ "$findings" = 3 ]; then
    echo "palisade lint: findings at --fail-on ${PALISADE_FAIL_ON:-error} (see the log above and code scanning)" >&2
    exit 1
  fi
  ;;
*)
  echo "usage: check.sh lint|diff|comment|verdict" >&2; exit 2 ;;
esac
