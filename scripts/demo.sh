#!/usr/bin/env bash
# The demo site (the README's first command): installs what is missing,
# brings the whole site up in network namespaces and shows it working.
#   scripts/demo.sh [--duration SECONDS] [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec node_modules/.bin/node scripts/demo.ts "$@"
