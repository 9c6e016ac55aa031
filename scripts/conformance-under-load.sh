#!/usr/bin/env bash
# Runs the strategies' conformance suite RUNS times (default 5) beside two
# CPU burners (yes >/dev/null), started and stopped here by PID, and prints
# how many runs passed. The suite must pass on a machine busy with other
# work, as CI machines are.
set -u
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
bin=$(mktemp /tmp/conformance-under-load.XXXXXX)
go test -race -c -o "$bin" ./strategies || exit 2
pids=()
test_pid=
stop() {
	[ -n "$test_pid" ] && kill "$test_pid" 2>/dev/null
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -f "$bin"
}
trap stop EXIT
trap 'exit 130' INT TERM
for _ in 1 2; do
	yes >/dev/null &
	pids+=($!)
done
cd strategies
pass=0
for i in $(seq "$runs"); do
	log="$bin.$i.log"
	start=$(date +%s%N)
	"$bin" -test.count=1 -test.v -test.timeout 10m -test.run '^TestConformance$' >"$log" 2>&1 &
	test_pid=$!
	if wait "$test_pid"; then
		pass=$((pass + 1))
		res=PASS
		rm -f "$log"
	else
		res="FAIL (log: $log)"
	fi
	test_pid=
	echo "run $i: $res in $(( ($(date +%s%N) - start) / 1000000 ))ms"
done
echo "conformance under two CPU burners: $pass of $runs runs passed"
[ "$pass" -eq "$runs" ]
