#!/usr/bin/env bash
# Makes sure ZooKeeper's server jar and a java to run it are there
# (/usr/share/java/zookeeper.jar or $LOCKLAB_ZOOKEEPER; java on PATH,
# $JAVA_HOME/bin/java or $LOCKLAB_JAVA): installs Debian's zookeeper package,
# which brings a JRE, when they are missing and apt-get can be used, else says
# how to install them. Never zookeeperd, which runs ZooKeeper as a system
# service: locklab runs its own ensembles (stores/zookeeper/zkproc); any
# service the package brings is stopped and disabled.
set -euo pipefail

have_jar() {
  if [ -n "${LOCKLAB_ZOOKEEPER:-}" ]; then [ -f "$LOCKLAB_ZOOKEEPER" ]; else [ -f /usr/share/java/zookeeper.jar ]; fi
}
have_java() {
  [ -n "${LOCKLAB_JAVA:-}" ] && [ -x "$LOCKLAB_JAVA" ] && return 0
  [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ] && return 0
  command -v java >/dev/null 2>&1 || [ -x /usr/bin/java ]
}

if [ -n "${LOCKLAB_ZOOKEEPER:-}" ] && ! have_jar; then
  echo "LOCKLAB_ZOOKEEPER=$LOCKLAB_ZOOKEEPER is not the ZooKeeper jar" >&2
  exit 1
fi
if have_jar && have_java; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
fi
if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
  echo "ZooKeeper or java not found: installing Debian's zookeeper package" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends zookeeper >/dev/null
  if command -v systemctl >/dev/null 2>&1; then $sudo systemctl disable --now zookeeper >/dev/null 2>&1 || true; fi
  if have_jar && have_java; then exit 0; fi
fi
echo "ZooKeeper not found. Install it (Debian/Ubuntu: apt-get install -y zookeeper," >&2
echo "not zookeeperd; elsewhere a ZooKeeper 3.x release and a JRE) or set LOCKLAB_ZOOKEEPER" >&2
echo "to the ZooKeeper jar and LOCKLAB_JAVA to a java binary." >&2
exit 1
