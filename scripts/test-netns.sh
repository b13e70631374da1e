#!/usr/bin/env bash
# The namespace suites (npm run test:netns), in two phases:
#
# 1. PAIRED, two files at a time. The long ones spend most of their time
#    waiting through a window that their acceptance fixes (30 s of a dead
#    server getting no connection, 60 s of a mapping without a move,
#    keepalived and ZeroMQ timeouts) with a few connections per second; the
#    short ones check states, rules and answers. All judge by counts from
#    one clock that sees the truth (the server's side, the daemon's
#    counters, the kernel's), never by how fast the machine is. The first
#    eleven took ~520 s of the suite alone and ~320 s two at a time
#    (2026-11-28, 2 cores).
# 2. Every other file, one at a time: they measure rates (±10 %), RTTs
#    (±5 ms through a userspace delay line), floods or restarts under load,
#    which a second suite on a 2-core machine would disturb.
#
# Both phases always run; the exit status is the first failing phase's.
# Every file lands in exactly one phase: a PAIRED name that does not exist
# fails the run rather than silently shrinking the suite.
set -uo pipefail
cd "$(dirname "$0")/.."

PAIRED=(
  # Longest first, so that the two lanes end together.
  test/netns/dns-mapping-capacity.test.ts
  test/netns/front-health.test.ts
  test/netns/front-pair.test.ts
  test/netns/agent-health.test.ts
  test/netns/front-ipv6-health.test.ts
  test/netns/control-reconnect.test.ts
  test/netns/control.test.ts
  test/netns/front-pair-ipv6.test.ts
  test/netns/front-ctl.test.ts
  test/netns/front-admin.test.ts
  test/netns/front-ipv6-admin.test.ts
  test/netns/dns-steering.test.ts
  test/netns/dns-rfc.test.ts
  test/netns/front-preflight.test.ts
  test/netns/nft-netlink.test.ts
  test/netns/metrics.test.ts
  test/netns/front-stray.test.ts
  test/netns/peer-clusters.test.ts
  test/netns/front-guard.test.ts
  test/netns/front-rules.test.ts
  test/netns/dns-zone-types.test.ts
  test/netns/dns-axfr.test.ts
  test/netns/dns-ipv6.test.ts
  test/netns/verdicts.test.ts
  test/netns/ct-dump.test.ts
  test/netns/front-flow-expiry.test.ts
  test/netns/ct-expire.test.ts
)

for f in "${PAIRED[@]}"; do
  [[ -f "$f" ]] || { echo "test-netns.sh: $f is listed in PAIRED but does not exist" >&2; exit 2; }
done
SOLO=()
while IFS= read -r f; do
  [[ " ${PAIRED[*]} " == *" $f "* ]] || SOLO+=("$f")
done < <(find test/netns -name '*.test.ts' | sort)

# The paired phase's output is kept so that its failures can be printed
# again at the very end: a CI that shows only the tail of the log must still
# show every failure with its assertion, not just the solo phase's summary.
paired_log=$(mktemp /tmp/sluice-netns-paired.XXXXXX)
trap 'rm -f "$paired_log"' EXIT
node --test --test-concurrency=2 --test-reporter=spec "${PAIRED[@]}" 2>&1 | tee "$paired_log"
paired=$?
node --test --test-concurrency=1 --test-reporter=spec "${SOLO[@]}"
solo=$?
if (( paired != 0 )); then
  echo
  echo "test-netns.sh: the paired phase failed (exit $paired); its failures again:"
  # The spec reporter's summary starts at its "failing tests:" line.
  sed -n '/failing tests:/,$p' "$paired_log"
  exit "$paired"
fi
exit "$solo"
