// The exposures: what each check concludes from the facts read, and the
// strategies that stay safe or fail there.

package deploy

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/redlock"
)

// fill completes the report from the facts read.
func (r *Report) fill(f *facts, o Options) {
	r.Version = f.info["redis_version"]
	r.Mode = f.mode()
	r.Role = f.role
	r.Replicas = f.replicas
	r.Cluster = f.cluster
	r.RTT = RTT{Median: median(f.rtt), Samples: f.rtt, TTL: o.TTL, NodeTimeout: nodeTimeout(o)}
	r.Clock = f.clock
	r.Clock.MaxSkew = o.MaxSkew
	universe := Strategies()
	if len(o.Strategies) > 0 {
		universe = slices.DeleteFunc(universe, func(s string) bool { return !slices.Contains(o.Strategies, s) })
	}
	for _, name := range Checks {
		e := Exposure{Check: name, Scenarios: slices.Clone(CheckScenarios[name]), Settings: map[string]string{}}
		switch {
		case f.noMaster != "" && name != CheckFailover:
			e.Status, e.Finding = Unknown, f.noMaster
		default:
			e.Status, e.Finding = judge[name](f, o, e.Settings)
		}
		if len(e.Settings) == 0 {
			e.Settings = nil
		}
		if e.Scenarios == nil {
			e.Scenarios = []string{}
		}
		e.Failing, e.Safe = standing(name, universe, o)
		r.Exposures = append(r.Exposures, e)
	}
}

// judge decides each check's status from the facts, with a finding of one
// line, and records the settings it read.
var judge = map[string]func(f *facts, o Options, set map[string]string) (Status, string){
	CheckEviction:    judgeEviction,
	CheckPersistence: judgePersistence,
	CheckFailover:    judgeFailover,
	CheckCluster:     judgeCluster,
	CheckClock:       judgeClock,
	CheckRTT:         judgeRTT,
}

// setting is CONFIG GET name, or INFO's field where CONFIG was refused;
// why says why neither told it.
func (f *facts) setting(name, infoField string) (value, why string) {
	if v, ok := f.config[name]; ok {
		return v, ""
	}
	if v, ok := f.info[infoField]; ok && infoField != "" {
		return v, ""
	}
	var reasons []string
	if r := f.configErr[name]; r != nil {
		reasons = append(reasons, r.Error())
	}
	if f.infoErr != nil && infoField != "" {
		reasons = append(reasons, f.infoErr.Error())
	}
	return "", strings.Join(reasons, "; ")
}

func judgeEviction(f *facts, _ Options, set map[string]string) (Status, string) {
	policy, whyP := f.setting("maxmemory-policy", "maxmemory_policy")
	limit, whyL := f.setting("maxmemory", "maxmemory")
	if whyP != "" {
		return Unknown, "maxmemory-policy unknown: " + whyP
	}
	set["maxmemory-policy"] = policy
	if policy == "noeviction" {
		return NotExposed, "maxmemory-policy noeviction: a full server refuses writes and evicts no key"
	}
	if whyL != "" {
		return Unknown, fmt.Sprintf("maxmemory-policy %s, maxmemory unknown: %s", policy, whyL)
	}
	set["maxmemory"] = limit
	if limit == "0" {
		return NotExposed, fmt.Sprintf("maxmemory-policy %s, but maxmemory 0: no memory limit, no key is evicted "+
			"(with a limit, lock keys would be)", policy)
	}
	which := "any key, a held lock's among them"
	if strings.HasPrefix(policy, "volatile-") {
		which = "keys with a TTL, held locks' among them"
	}
	return Exposed, fmt.Sprintf("maxmemory-policy %s with maxmemory %s: a full server evicts %s",
		policy, bytesText(limit), which)
}

func judgePersistence(f *facts, _ Options, set map[string]string) (Status, string) {
	aof, why := f.setting("appendonly", "")
	if why != "" {
		if v, ok := f.info["aof_enabled"]; ok {
			aof, why = map[string]string{"1": "yes", "0": "no"}[v], ""
		}
	}
	if why != "" || aof == "" {
		if f.infoErr != nil {
			why = strings.TrimPrefix(why+"; "+f.infoErr.Error(), "; ")
		}
		return Unknown, "appendonly unknown: " + why
	}
	set["appendonly"] = aof
	if aof == "no" {
		save, whyS := f.setting("save", "")
		if whyS == "" {
			set["save"] = save
		}
		switch {
		case whyS != "":
			return Exposed, "appendonly no: a restart forgets every lock taken since the last snapshot, if any"
		case save == "":
			return Exposed, `appendonly no and no snapshots (save ""): a restart comes back empty, every lock forgotten`
		}
		return Exposed, fmt.Sprintf("appendonly no, RDB snapshots only (save %q): a restart forgets every lock taken since the last one", save)
	}
	fsync, why := f.setting("appendfsync", "")
	if why != "" {
		return Unknown, "appendonly yes, appendfsync unknown: " + why
	}
	set["appendfsync"] = fsync
	switch fsync {
	case "always":
		return NotExposed, "appendonly yes, appendfsync always: every write is on disk before Redis answers, and a restart keeps the locks"
	case "everysec":
		return Exposed, "appendonly yes, appendfsync everysec: a crash loses up to the last second of writes, locks among them"
	}
	return Exposed, fmt.Sprintf("appendonly yes, appendfsync %s: a crash loses what the OS had not yet written to disk, locks among them", fsync)
}

func judgeFailover(f *facts, _ Options, set map[string]string) (Status, string) {
	if m := f.sentinel; m != nil {
		set["sentinel-master"] = m.Name
		set["replicas"] = strconv.Itoa(m.Replicas)
		set["sentinels"] = strconv.Itoa(m.Sentinels)
		if m.Replicas == 0 {
			return NotExposed, fmt.Sprintf("Sentinel watches master %s at %s, which has no replica to promote", m.Name, m.Addr)
		}
		watch, promote := "watch", "promote"
		if m.Sentinels == 1 {
			watch, promote = "watches", "promotes"
		}
		which := "one of its " + plural(m.Replicas, "replica")
		if m.Replicas == 1 {
			which = "its replica"
		}
		return Exposed, fmt.Sprintf("%s %s master %s at %s and %s %s when it fails; "+
			"replication is asynchronous, and the promoted one may lack a lock",
			plural(m.Sentinels, "Sentinel"), watch, m.Name, m.Addr, promote, which)
	}
	if f.role == "" {
		why := "ROLE and INFO refused"
		if f.roleErr != nil {
			why = f.roleErr.Error()
		}
		if f.infoErr != nil {
			why += "; " + f.infoErr.Error()
		}
		return Unknown, "role unknown: " + why
	}
	set["role"] = f.role
	if f.replicas >= 0 {
		set["replicas"] = strconv.Itoa(f.replicas)
	}
	watched := ""
	if f.sentinelSubs > 0 {
		set["sentinels"] = strconv.Itoa(f.sentinelSubs)
		watched = fmt.Sprintf(", watched by %s", plural(f.sentinelSubs, "Sentinel"))
	}
	if f.role == "replica" {
		set["master"] = f.master
		return Exposed, fmt.Sprintf("a replica of %s%s: it copies its master asynchronously, and a failover "+
			"promotes a replica that may lack a lock", f.master, watched)
	}
	if c := f.cluster; c != nil && c.Replicas > 0 {
		set["cluster-replicas"] = strconv.Itoa(c.Replicas)
		return Exposed, fmt.Sprintf("the cluster has %s: when a master fails the cluster promotes its replica, "+
			"which copies it asynchronously and may lack a lock", plural(c.Replicas, "replica"))
	}
	switch {
	case f.replicas > 0:
		return Exposed, fmt.Sprintf("master with %s%s, copied asynchronously: a failover (Sentinel, an operator, "+
			"a managed service) promotes one that may lack a lock", plural(f.replicas, "replica"), watched)
	case f.replicas == 0:
		return NotExposed, "master without replicas" + watched + ": nothing to fail over to"
	}
	return Unknown, "master, replicas unknown"
}

func judgeCluster(f *facts, _ Options, set map[string]string) (Status, string) {
	c := f.cluster
	switch {
	case f.clusterErr != nil:
		return Unknown, "cluster mode unknown: " + f.clusterErr.Error()
	case c == nil:
		set["cluster_enabled"] = "0"
		return NotExposed, "cluster mode off"
	}
	set["cluster_enabled"] = "1"
	set["cluster_state"] = c.State
	return Exposed, fmt.Sprintf("cluster mode (cluster_state %s, %s serving %d of 16384 slots): each key lives "+
		"in one hash slot, a command or script whose keys span slots fails with CROSSSLOT, and there are no "+
		"independent masters", c.State, plural(c.Masters, "master"), c.SlotsAssigned)
}

func judgeClock(f *facts, o Options, set map[string]string) (Status, string) {
	if f.clockErr != nil {
		return Unknown, "the server's clock unknown: " + f.clockErr.Error()
	}
	c := f.clock
	set["offset"] = signed(c.Offset)
	set["uncertainty"] = round(c.Uncertainty).String()
	off := c.Offset
	dir := "ahead of"
	if off < 0 {
		off, dir = -off, "behind"
	}
	says := fmt.Sprintf("the server's clock is %s %s this host's (±%s)", round(off), dir, round(c.Uncertainty))
	if off-c.Uncertainty > o.MaxSkew {
		return Exposed, fmt.Sprintf("%s, more than %s: a timestamp lock written by one clock and judged by the "+
			"other expires that much early or late", says, o.MaxSkew)
	}
	if off > o.MaxSkew {
		// Beyond the limit as measured, within it by the measurement's
		// uncertainty: the round trip is too long to tell.
		return Unknown, fmt.Sprintf("%s: more than %s as measured, but not by more than the measurement's "+
			"uncertainty: a round trip of %s cannot tell a skew of %s", says, o.MaxSkew, round(2*c.Uncertainty), o.MaxSkew)
	}
	return NotExposed, fmt.Sprintf("%s, within %s", says, o.MaxSkew)
}

func judgeRTT(f *facts, o Options, set map[string]string) (Status, string) {
	m, nt := median(f.rtt), nodeTimeout(o)
	set["median"] = round(m).String()
	set["node-timeout"] = nt.String()
	set["ttl"] = o.TTL.String()
	of := fmt.Sprintf("median round trip %s (%s)", round(m), plural(len(f.rtt), "PING"))
	if m >= nt {
		return Exposed, fmt.Sprintf("%s, at least redlock's node timeout of %s for a %s TTL: redlock counts this "+
			"server as failed in every round", of, nt, o.TTL)
	}
	return NotExposed, fmt.Sprintf("%s, under redlock's node timeout of %s for a %s TTL", of, nt, o.TTL)
}

// standing lists the strategies of universe that fail where check looks,
// and those that stay safe: from the recorded matrix's cells of the
// check's scenarios; for cluster mode, from Description.NoCluster; for the
// round trip, from the strategies that read Config.NodeTimeout.
func standing(check string, universe []string, o Options) ([]Failure, []string) {
	failing, safe := []Failure{}, []string{}
	scs := CheckScenarios[check]
	if len(scs) > 0 {
		m := Verdicts()
		bad := map[string]bool{}
		for _, sc := range scs {
			for _, s := range universe {
				if v, ok := m.Cell(s, sc); ok && v.Failed() {
					bad[s] = true
					failing = append(failing, Failure{Strategy: s, Scenario: sc, Outcome: v.Outcome,
						Property: v.Property, Schedule: v.Schedule, Replay: v.Replay()})
				}
			}
		}
		for _, s := range universe {
			applies := slices.ContainsFunc(scs, func(sc string) bool { _, ok := m.Cell(s, sc); return ok })
			if applies && !bad[s] {
				safe = append(safe, s)
			}
		}
		return failing, safe
	}
	for _, s := range universe {
		d, err := strategies.Info(s)
		if err != nil {
			continue
		}
		switch {
		case check == CheckCluster && d.NoCluster != "":
			failing = append(failing, Failure{Strategy: s, Reason: "strategies.New refuses a Redis Cluster: " + d.NoCluster})
		case check == CheckRTT && slices.Contains(d.Options, strategies.OptNodeTimeout):
			failing = append(failing, Failure{Strategy: s, Reason: fmt.Sprintf("a node that answers later than "+
				"the node timeout (%s) counts as failed; a round with too many such nodes wins nothing", nodeTimeout(o))})
		default:
			safe = append(safe, s)
		}
	}
	return failing, safe
}

// nodeTimeout is Redlock's node timeout for o.TTL, as redlock computes it.
func nodeTimeout(o Options) time.Duration {
	r, err := redlock.New(locklab.Config{Nodes: []locklab.ConnSource{&redis.Pool{}}, NodeTimeout: o.NodeTimeout})
	if err != nil {
		return o.NodeTimeout
	}
	return r.NodeTimeout(o.TTL)
}

// median of ds (0 for none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// round keeps a duration's three leading digits or so.
func round(d time.Duration) time.Duration {
	a := d
	if a < 0 {
		a = -a
	}
	switch {
	case a < time.Millisecond:
		return d.Round(time.Microsecond)
	case a < time.Second:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// signed is d rounded, with its sign.
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + round(d).String()
	}
	return round(d).String()
}

// bytesText is a byte count as maxmemory reads: "104857600" as "100mb".
func bytesText(s string) string {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return s
	}
	for _, u := range []struct {
		n    int64
		name string
	}{{1 << 30, "gb"}, {1 << 20, "mb"}, {1 << 10, "kb"}} {
		if n >= u.n && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.name
		}
	}
	return s + " bytes"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
