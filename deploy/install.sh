#!/usr/bin/env bash
# Installs Sluice for systemd from this source tree (after scripts/install.sh
# has built it), or removes it again. Idempotent both ways.
#
#   deploy/install.sh [--root DIR]                     install
#   deploy/install.sh [--root DIR] --uninstall [--purge]  remove what install put
#
# Installs (every path below under DIR, default /; DESTDIR=DIR works too):
#   /opt/sluice/                 bin/sluice, src/, package.json, the built addon
#                                native/build/Release/sluice_nfq.node, deploy/,
#                                node_modules/ without devDependencies (with the
#                                pinned Node 24 runtime, node_modules/node)
#   /usr/local/bin/sluice        symlink to /opt/sluice/bin/sluice
#   /etc/systemd/system/sluice-{front,dns,agent,master}.service
#   /usr/lib/sysusers.d/sluice.conf   the system user `sluice`, created now
#                                (when DIR is / or has an /etc/passwd) or by
#                                systemd-sysusers at the next boot
#   /etc/sluice/{front,dns,agent,master}.yaml, /etc/sluice/zones/example.test.zone
#                                examples, each only if no such file exists
#                                (an existing configuration is never replaced)
# and runs `systemctl daemon-reload` when DIR is / and systemd is running.
#
# --uninstall stops and disables the units (when systemd runs), removes the
# front node's rules (`sluice front --remove-rules`, when DIR is /: a stopped
# front node leaves them in place on purpose), removes all of the above but
# /etc/sluice, which stays unless --purge (which also deletes the user
# `sluice` when DIR is /). If the rules cannot be removed (a front node still
# runs outside systemd) everything else is removed all the same, the reason
# is printed and the exit status is 1.
set -euo pipefail

SRC="$(cd "$(dirname "$0")/.." && pwd)"
ROOT="${DESTDIR:-/}"
MODE=install
PURGE=0
while [ "$#" -gt 0 ]; do
  case "$1" in
    --root) ROOT="${2:?--root needs a directory}"; shift 2 ;;
    --root=*) ROOT="${1#--root=}"; shift ;;
    --uninstall) MODE=uninstall; shift ;;
    --purge) PURGE=1; shift ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$PURGE" = 1 ] && [ "$MODE" != uninstall ]; then
  echo "install.sh: --purge goes with --uninstall" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (it installs system files and a system user)" >&2
  exit 1
fi
mkdir -p "$ROOT"
ROOT="$(cd "$ROOT" && pwd)"
# $R prefixes every installed path: empty for /, so the paths print as on the target.
R="${ROOT%/}"

PREFIX=/opt/sluice
ETC=/etc/sluice
UNITS=(sluice-front.service sluice-dns.service sluice-agent.service sluice-master.service)
UNITDIR=/etc/systemd/system
SYSUSERS=/usr/lib/sysusers.d/sluice.conf
BINLINK=/usr/local/bin/sluice
# example source (under deploy/examples) -> installed name (under /etc/sluice)
EXAMPLES=(front-cluster1.yaml:front.yaml dns.yaml:dns.yaml agent-s1a.yaml:agent.yaml master.yaml:master.yaml example.test.zone:zones/example.test.zone)

systemd_running() { [ "$ROOT" = / ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; }
user_db() { [ "$ROOT" = / ] || [ -f "$R/etc/passwd" ]; }
has_group() { if [ "$ROOT" = / ]; then getent group sluice >/dev/null; else grep -q '^sluice:' "$R/etc/group" 2>/dev/null; fi; }
say() { echo "install.sh: $*"; }

# Removes directories this script may have created, deepest first, if
# empty; only inside a --root other than / (never the host's /usr or /etc).
prune_dirs() {
  [ "$ROOT" = / ] && return 0
  local d
  for d in /etc/systemd/system /etc/systemd /usr/lib/sysusers.d /usr/lib /usr/local/bin /usr/local /usr /opt /etc/sluice/zones /etc/sluice /etc; do
    rmdir "$R$d" 2>/dev/null || true
  done
}

# The front node's rules outlive it (a stop leaves them so the fallback
# keeps serving until the next start); uninstalling is when they go. Only on
# this host (DIR /), with the installed binary, after the units stopped:
# `--remove-rules` refuses while a front node is bound to its queue.
RULES_LEFT=0
remove_front_rules() {
  [ "$ROOT" = / ] || return 0
  [ -x "$PREFIX/bin/sluice" ] || { say "no $PREFIX/bin/sluice: front node rules not checked"; return 0; }
  local cfg=()
  [ -f "$ETC/front.yaml" ] && cfg=(--config "$ETC/front.yaml")
  if ! "$PREFIX/bin/sluice" front --remove-rules "${cfg[@]}"; then
    RULES_LEFT=1
    say "the front node's rules were NOT removed (see above); after stopping it: sluice front --remove-rules"
  fi
}

uninstall() {
  if systemd_running; then
    # Stopped and disabled one by one: a unit that was never enabled or
    # loaded must not keep the others running.
    for u in "${UNITS[@]}"; do systemctl disable --now "$u" >/dev/null 2>&1 || true; done
  fi
  remove_front_rules
  for u in "${UNITS[@]}"; do rm -f "$R$UNITDIR/$u"; done
  rm -f "$R$SYSUSERS"
  if [ -L "$R$BINLINK" ]; then rm -f "$R$BINLINK"; fi
  rm -rf "$R$PREFIX" "$R/opt/.sluice.staging" "$R/opt/.sluice.old"
  if [ "$PURGE" = 1 ]; then
    rm -rf "$R$ETC"
    if [ "$ROOT" = / ] && getent passwd sluice >/dev/null; then
      userdel sluice
      getent group sluice >/dev/null && groupdel sluice
    fi
    say "removed, with $ETC$([ "$ROOT" = / ] && echo " and the user sluice")"
  else
    [ -d "$R$ETC" ] && say "kept $R$ETC (configuration; --uninstall --purge removes it)"
    say "removed"
  fi
  if systemd_running; then systemctl daemon-reload; fi
  prune_dirs
}

install_tree() {
  local addon="$SRC/native/build/Release/sluice_nfq.node" node="$SRC/node_modules/node/bin/node"
  if [ ! -f "$addon" ] || [ ! -x "$node" ]; then
    echo "install.sh: $SRC is not built (no addon or no pinned Node 24): run scripts/install.sh first" >&2
    exit 1
  fi
  # Staged beside the target, then swapped in: a failed copy leaves the
  # installed tree as it was.
  local stage="$R/opt/.sluice.staging"
  rm -rf "$stage" "$R/opt/.sluice.old"
  mkdir -p "$stage/native/build/Release" "$stage/node_modules"
  cp -a "$SRC/bin" "$SRC/src" "$SRC/deploy" "$SRC/package.json" "$SRC/package-lock.json" "$stage/"
  cp "$addon" "$stage/native/build/Release/"
  cp -a "$SRC/node_modules/." "$stage/node_modules/"
  # Runtime packages only (the lock file names them); offline: nothing is fetched.
  (cd "$stage" && npm prune --omit=dev --offline --no-audit --no-fund --loglevel=error >/dev/null)
  find "$stage/node_modules" -mindepth 1 -type d -empty -delete
  rm -f "$stage/node_modules/.sluice-install-stamp" "$stage/node_modules/.package-lock.json"
  chown -R root:root "$stage"
  chmod -R u+rwX,go+rX,go-w "$stage"
  "$stage/node_modules/node/bin/node" -e "require('$stage/native/build/Release/sluice_nfq.node')" \
    || { echo "install.sh: the staged addon does not load in the pinned Node" >&2; exit 1; }
  if [ -d "$R$PREFIX" ]; then mv "$R$PREFIX" "$R/opt/.sluice.old"; fi
  mv "$stage" "$R$PREFIX"
  rm -rf "$R/opt/.sluice.old"
  mkdir -p "$(dirname "$R$BINLINK")"
  ln -sfn "$PREFIX/bin/sluice" "$R$BINLINK"
}

install_user() {
  install -D -m 0644 "$SRC/deploy/systemd/sluice.sysusers.conf" "$R$SYSUSERS"
  if ! user_db; then
    say "no $R/etc/passwd: user sluice not created ($SYSUSERS creates it at the target's boot)"
    return 0
  fi
  if [ "$ROOT" = / ] && getent passwd sluice >/dev/null; then return 0; fi
  if [ "$ROOT" != / ] && grep -q '^sluice:' "$R/etc/passwd"; then return 0; fi
  if command -v systemd-sysusers >/dev/null 2>&1; then
    systemd-sysusers --root="$ROOT" "$R$SYSUSERS"
  else
    useradd --root "$ROOT" --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin sluice
  fi
  say "created the system user sluice"
}

install_units() {
  mkdir -p "$R$UNITDIR"
  for u in "${UNITS[@]}"; do install -m 0644 "$SRC/deploy/systemd/$u" "$R$UNITDIR/$u"; done
}

install_examples() {
  local pair from to new=()
  for d in "$R$ETC" "$R$ETC/zones"; do
    if [ ! -d "$d" ]; then install -d -m 0750 "$d"; new+=("$d"); fi
  done
  for pair in "${EXAMPLES[@]}"; do
    from="${pair%%:*}"
    to="$R$ETC/${pair#*:}"
    if [ -e "$to" ]; then
      say "kept the existing $to"
      continue
    fi
    install -m 0640 "$SRC/deploy/examples/$from" "$to"
    new+=("$to")
  done
  # The daemons (user sluice) read their configuration; nobody else needs
  # to. Only what was created now: existing files keep their owner and mode.
  if [ "${#new[@]}" -gt 0 ] && has_group; then chgrp sluice "${new[@]}"; fi
}

if [ "$MODE" = uninstall ]; then
  uninstall
  exit "$RULES_LEFT"
fi
install_tree
install_user
install_units
install_examples
if systemd_running; then
  systemctl daemon-reload
  say "installed; start with: systemctl enable --now sluice-front (or sluice-dns, sluice-agent, sluice-master)"
else
  say "installed under $ROOT (systemd is not running here: no daemon-reload)"
fi
