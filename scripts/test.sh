#!/usr/bin/env bash
# The whole test suite (the README's second command; .ci/run calls it):
# install what is missing, then type check, lint, unit and namespace tests.
# Namespaces are named from a per-run base, and whatever a crashed test left
# behind under that base is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh

export SLUICE_NS_BASE="st$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')"
sweep() {
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${SLUICE_NS_BASE}[0-9a-f]{3}-" || true); do
    ip netns pids "$ns" | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf /run/sluice-testbed/"${SLUICE_NS_BASE}"* 2>/dev/null || true
}
trap sweep EXIT
npm test
