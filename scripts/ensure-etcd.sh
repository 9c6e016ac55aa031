#!/usr/bin/env bash
# Makes sure etcd is there (on PATH, or $LOCKLAB_ETCD): installs Debian's
# etcd-server package when it is missing and apt-get can be used, else says
# how to install it. The package's own service is stopped and disabled:
# locklab runs its own clusters.
set -euo pipefail
if [ -n "${LOCKLAB_ETCD:-}" ]; then
  if [ -x "$LOCKLAB_ETCD" ]; then exit 0; fi
  echo "LOCKLAB_ETCD=$LOCKLAB_ETCD is not an executable etcd" >&2
  exit 1
fi
if command -v etcd >/dev/null 2>&1 || [ -x /usr/bin/etcd ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
fi
if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
  echo "etcd not found: installing Debian's etcd-server package" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq etcd-server >/dev/null
  if command -v systemctl >/dev/null 2>&1; then $sudo systemctl disable --now etcd >/dev/null 2>&1 || true; fi
  exit 0
fi
echo "etcd not found. Install it (Debian/Ubuntu: apt-get install -y etcd-server;" >&2
echo "macOS: brew install etcd) or set LOCKLAB_ETCD to its path." >&2
exit 1
