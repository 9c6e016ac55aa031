#!/usr/bin/env bash
# Makes sure the PostgreSQL server binaries (initdb, postgres) are there:
# installs Debian's postgresql package when they are missing and apt-get can
# be used, else says how to install them. postgres refuses to run as root,
# so a root run also makes sure the unprivileged user the tests run the
# server as exists ($LOCKLAB_PG_USER, default postgres: the package creates
# it; servers installed otherwise may lack it).
set -euo pipefail

pg_user="${LOCKLAB_PG_USER:-postgres}"

if [ -n "${LOCKLAB_PG_BINDIR:-}" ] && ! { [ -x "$LOCKLAB_PG_BINDIR/initdb" ] && [ -x "$LOCKLAB_PG_BINDIR/postgres" ]; }; then
  echo "LOCKLAB_PG_BINDIR=$LOCKLAB_PG_BINDIR holds no initdb and postgres" >&2
  exit 1
fi

have_server() {
  [ -n "${LOCKLAB_PG_BINDIR:-}" ] && return 0
  local d
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then return 0; fi
  done
  command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1
}

sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
fi

if ! have_server; then
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
    echo "PostgreSQL server not found: installing Debian's postgresql package" >&2
    $sudo apt-get update -qq
    # The package makes and starts a cluster of its own where it can;
    # locklab runs its own servers, so that one is stopped.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
    if command -v systemctl >/dev/null 2>&1; then $sudo systemctl disable --now postgresql >/dev/null 2>&1 || true; fi
    if command -v pg_ctlcluster >/dev/null 2>&1; then
      for v in /etc/postgresql/*/main; do
        [ -d "$v" ] || continue
        ver=$(basename "$(dirname "$v")")
        $sudo pg_ctlcluster "$ver" main stop >/dev/null 2>&1 || true
      done
    fi
  else
    echo "PostgreSQL server not found. Install it (Debian/Ubuntu: apt-get install -y postgresql;" >&2
    echo "macOS: brew install postgresql@15) or set LOCKLAB_PG_BINDIR to the directory of initdb and postgres." >&2
    exit 1
  fi
fi

# Only a root run needs another user: as anyone else the server runs as that user.
if [ "$(id -u)" = 0 ] && ! id "$pg_user" >/dev/null 2>&1; then
  echo "creating the unprivileged user $pg_user to run postgres as" >&2
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$pg_user"
fi
