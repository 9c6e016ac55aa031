// The schedules told or found for the Redis strategies: the ones the
// documentation replays, which each cell runs after the scenario's own
// schedule and before its bounded search.

package redis

// known are the schedules told or found for the Redis strategies, by
// scenario and then strategy (harness.Driver.Known): each cell replays
// them after the scenario's own schedule and before its search, so a
// counterexample the docs show is never one the cell's search stopped
// short of.
var known = map[string]map[string][]string{
	"crash-before-expire": {
		"setnx-expire-always": {"c2 c2 c2 c2 c1 crash(c1)"},
	},
	"release-after-expiry": {
		"incr-expire-lua":  {"c1 c1 time c2 c1"},
		"set-nx-px":        {"c1 c1 c1 time c2 c1"},
		"set-nx-px-del":    {"c1 c1 time c2 c1"},
		"set-nx-px-getdel": {"c1 c1 c1 time c2 c1"},
		"setnx-getset":     {"c1 c1 c1 time c2 c2 c2 c1"},
		"setnx-getset-lua": {"c1 c1 c1 time c2 c2 c2 c1"},
	},
	"pause-in-release": {
		"set-nx-px-getdel": {"c1 c1 c1 pause(c1) time c2 resume(c1) c1"},
	},
	"clock-skew": {
		"setnx-getset": {"c1 skew(c2,+32s) c2 c2 c2"},
	},
	"pause-past-ttl": {
		"set-nx-px": {"c1 c1 c2 c2 c1"},
	},
	"pause-past-ttl-fenced": {
		"hash-reentrant": {"c1 c1 c2 c2 c1"},
		"set-nx-px":      {"c1 c1 c2 c2 c1"},
		"set-nx-px-del":  {"c1 c1 c2 c2 c1"},
	},
	"partitioned-holder": {
		"set-nx-px": {"c1 isolate(c1) time c2 c2 c1 c1 rejoin(c1) c1"},
	},
	"pause-past-ttl-guarded": {
		"set-nx-px":       {"c1 c1 c2 c2 c1"},
		"incr-expire-lua": {"c1 c1 c2 c2 c1"},
	},
	"lost-reply": {
		"incr-expire": {"lose(c1) c1 c1 c2"},
	},
	"redlock-pause": {
		"redlock": {"c1 c1@n1 c1@n2 c1@n3 c1 c2 c2@n1 c2@n2 c2@n3 c2 c1"},
	},
	"failover-loses-lock": {
		"set-nx-px-wait": {"c1 c1 failover(n1) c1 c1 c2"},
	},
}
