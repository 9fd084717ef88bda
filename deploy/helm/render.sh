#!/usr/bin/env bash
# Writes the plain manifests of deploy/ from the Helm chart, so that the two never differ
# (a test checks that they are equal object by object):
#
#   deploy/00-namespace.yaml ... deploy/03-daemonset.yaml   the chart's defaults, with the namespace
#   deploy/cleanup/palisade-cleanup.yaml                    agent.enabled=false, cleanup.enabled=true
#
# Edit the chart (deploy/helm/palisade), then run this with helm on PATH (or HELM=path).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
helm="${HELM:-helm}"
chart="$root/deploy/helm/palisade"
render() { "$helm" template palisade "$chart" --namespace palisade-system "$@"; }

# One template's documents out of a rendering (from its `# Source:` line to the next one).
extract() {
  awk -v src="# Source: palisade/templates/$1" '
    /^# Source: / { on = ($0 == src); if (on && docs++) print "---"; next }
    /^---$/ { on = 0; next }
    on { print }' | sed -e '/./,$!d'
}

defaults="$(render --set namespace.create=true)"
cleanup="$(render --set agent.enabled=false --set cleanup.enabled=true)"
header='# Generated from deploy/helm/palisade by deploy/helm/render.sh: edit the chart, not this file.'
write() { { echo "$header"; cat; } > "$root/deploy/$1"; }
extract namespace.yaml <<< "$defaults" | write 00-namespace.yaml
extract serviceaccount.yaml <<< "$defaults" | write 01-serviceaccount.yaml
extract rbac.yaml <<< "$defaults" | write 02-rbac.yaml
extract daemonset.yaml <<< "$defaults" | write 03-daemonset.yaml
{
  cat <<'USAGE'
# To remove enforcement for good, after deleting the agent's DaemonSet:
#
#   kubectl delete -f deploy/03-daemonset.yaml
#   kubectl apply -f deploy/cleanup/palisade-cleanup.yaml
#   kubectl -n palisade-system rollout status daemonset/palisade-cleanup
#   kubectl delete -f deploy/cleanup/palisade-cleanup.yaml -f deploy/
#
# (with Helm: helm upgrade ... --set agent.enabled=false --set cleanup.enabled=true).
USAGE
  extract cleanup.yaml <<< "$cleanup"
} | write cleanup/palisade-cleanup.yaml
echo "wrote deploy/0*.yaml and deploy/cleanup/palisade-cleanup.yaml" >&2
