#!/usr/bin/env bash
# Installs everything Sluice needs on Debian 12, idempotently (as root):
# Debian packages, npm packages (including the pinned Node 24 runtime), and
# the NFQUEUE addon built with node-gyp against the machine's Node headers.
# Each step is skipped when already done, so this runs before every demo and
# test run at almost no cost.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (it installs Debian packages; the tests create network namespaces)" >&2
  exit 1
fi

# chromium: the dashboard test drives Debian's Chromium with playwright-core
# (never a browser build playwright would download).
# conntrack: the tests and benchmarks insert and count flows with it (the
# front node itself lists them over ctnetlink in its addon); systemd:
# systemd-analyze (the units' test) and systemd-sysusers (deploy/install.sh).
# etcd-server, etcd-client: the admission test elects its coordinator with a
# real etcd (run in a namespace with its own data directory).
# nftables: the front node loads its own table (`table ip sluice`) with
# `nft -f`, and the rules-healing test flushes the ruleset with `nft flush
# ruleset`, as Debian's stock /etc/nftables.conf does on a firewall reload
# (the package's service stays disabled: nothing is loaded at install).
# gcc: `cc`, which compiles the front benchmark's C helpers (scripts/bench/
# synflood.c, connlat.c) on demand.
# keepalived, conntrackd: front-node pairs (VRRPv3 and flow sync); the tests
# and the testbed run them in namespaces with files from `sluice ha render`.
APT_PKGS=(ca-certificates python3 make gcc g++ pkg-config libnetfilter-queue-dev libmnl-dev libsystemd-dev
  iptables iproute2 nginx-light curl wrk iputils-ping procps bind9-dnsutils dnsperf nsd
  chromium conntrack systemd redis-server etcd-server etcd-client nftables keepalived conntrackd)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
# node-gyp builds against these headers (never downloads any); Node-API
# headers are the same for every Node version, so Debian's libnode-dev
# serves when the machine's Node has none.
NODEDIR="${SLUICE_NODEDIR:-/usr}"
[ -f "$NODEDIR/include/node/node_api.h" ] || missing+=(libnode-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install.sh: apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # NSD is only the DNS benchmark's reference, run in a namespace with its own
  # config: the distribution's service (started on port 53 of the host by the
  # package) is stopped and disabled when this script installed it.
  if [[ " ${missing[*]} " == *" nsd "* ]] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now nsd >/dev/null 2>&1 || true
  fi
  # Likewise Redis: the throttling tests and benchmark start their own
  # redis-server on loopback in a temporary directory; the distribution's
  # service (port 6379 of the host) is not used.
  if [[ " ${missing[*]} " == *" redis-server "* ]] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now redis-server >/dev/null 2>&1 || true
  fi
  # And etcd: the admission test runs its own etcd in a namespace.
  if [[ " ${missing[*]} " == *" etcd-server "* ]] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now etcd >/dev/null 2>&1 || true
  fi
  # And keepalived and conntrackd: the pair tests run their own, per
  # namespace, from rendered files; the distribution's services (the
  # host's VRRP and flow sync) are not used.
  if [[ " ${missing[*]} " == *" keepalived "* ]] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now keepalived >/dev/null 2>&1 || true
  fi
  if [[ " ${missing[*]} " == *" conntrackd "* ]] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now conntrackd >/dev/null 2>&1 || true
  fi
fi

stamp=node_modules/.sluice-install-stamp
want="$(cat package.json package-lock.json | sha256sum | cut -c1-64)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  echo "install.sh: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi

addon=native/build/Release/sluice_nfq.node
if [ ! -f "$addon" ] || [ -n "$(find native/src native/binding.gyp -newer "$addon" 2>/dev/null)" ]; then
  echo "install.sh: building native/ (node-gyp, nodedir=$NODEDIR)"
  SLUICE_NODEDIR="$NODEDIR" npm run --silent build:native >/dev/null
fi

# raw-socket (under net-ping, the front node's ICMP echo) is a NAN addon: it
# must be compiled for the Node that runs it (the pinned Node 24), not for the
# machine's Node 20 whose headers node-gyp finds at /usr. The pinned runtime's
# npm package ships its own headers; build against those.
node24="$PWD/node_modules/.bin/node"
if ! "$node24" -e "require('raw-socket')" >/dev/null 2>&1; then
  hdr="$(find node_modules/node -path '*/include/node/node_version.h' 2>/dev/null | head -n1)"
  if [ -z "$hdr" ]; then
    # A later `npm install` prunes the runtime package's nested copy (and its
    # headers); rebuilding the package fetches it again.
    npm rebuild node --loglevel=error >/dev/null
    hdr="$(find node_modules/node -path '*/include/node/node_version.h' 2>/dev/null | head -n1)"
  fi
  if [ -z "$hdr" ]; then
    echo "install.sh: the pinned Node's headers are missing (node_modules/node); run: rm -rf node_modules && bash scripts/install.sh" >&2
    exit 1
  fi
  nodedir="$(cd "$(dirname "$hdr")/../.." && pwd)"
  echo "install.sh: building raw-socket for $("$node24" --version)"
  (cd node_modules/raw-socket && "$node24" ../node-gyp/bin/node-gyp.js rebuild --nodedir="$nodedir" >/dev/null 2>&1)
  "$node24" -e "require('raw-socket')"
fi

