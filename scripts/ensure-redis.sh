#!/usr/bin/env bash
# Makes sure redis-server is on PATH: installs Debian's package when it is
# missing and apt-get can be used, else says how to install it.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 || [ -n "${LOCKLAB_REDIS_SERVER:-}" ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
fi
if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
  echo "redis-server not found: installing Debian's redis-server package" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
  # Debian starts a system service on install where it can; locklab runs its own servers.
  if command -v systemctl >/dev/null 2>&1; then $sudo systemctl disable --now redis-server >/dev/null 2>&1 || true; fi
  exit 0
fi
echo "redis-server not found. Install it (Debian/Ubuntu: apt-get install -y redis-server;" >&2
echo "macOS: brew install redis) or set LOCKLAB_REDIS_SERVER to its path." >&2
exit 1
