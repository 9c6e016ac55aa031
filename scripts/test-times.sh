#!/usr/bin/env bash
# Prints the wall time of each package go test ran, slowest first, from the
# output go test wrote (the "ok" and "FAIL" lines with their times), so that
# a package that grows slow is seen before it becomes a failure. Used by
# make test at the end of its run: test-times.sh LOG START, where START is
# the run's start in seconds since the epoch.
set -euo pipefail
log=$1
start=${2:-}
echo
echo "== wall time per package, slowest first (go test's own figure; packages run side by side)"
awk -F'\t' '($1 ~ /^(ok|FAIL) *$/) && $3 ~ /^[0-9.]+s/ {
	t = $3; sub(/s.*/, "", t); st = $1; gsub(/ /, "", st)
	printf "%8.1fs  %-4s %s\n", t, st, $2
}' "$log" | sort -rn
if [ -n "$start" ]; then
	echo "== go test in all: $(( $(date +%s) - start ))s"
fi
