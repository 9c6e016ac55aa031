package deploy_test

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/deploy"
	"github.com/locklab/locklab/internal/tooling/redisproc"
	"github.com/locklab/locklab/internal/tooling/redistest"
)

// check runs deploy.CheckPool on addr ("host:port") with o.
func check(t *testing.T, po locklab.PoolOptions, o deploy.Options) *deploy.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := deploy.CheckPool(ctx, po, o)
	require.NoError(t, err)
	require.Len(t, rep.Exposures, len(deploy.Checks))
	for i, e := range rep.Exposures {
		require.Equal(t, deploy.Checks[i], e.Check)
		require.NotEmpty(t, e.Finding, e.Check)
	}
	return rep
}

func exposure(t *testing.T, r *deploy.Report, name string) deploy.Exposure {
	t.Helper()
	e, ok := r.Exposure(name)
	require.True(t, ok, name)
	return e
}

// status maps each check to its status, for a compact comparison.
func status(r *deploy.Report) map[string]deploy.Status {
	out := map[string]deploy.Status{}
	for _, e := range r.Exposures {
		out[e.Check] = e.Status
	}
	return out
}

func failingStrategies(e deploy.Exposure, scenario string) []string {
	var out []string
	for _, f := range e.Failing {
		if f.Scenario == scenario {
			out = append(out, f.Strategy)
		}
	}
	return out
}

// recordedFailing are the strategies the recorded matrix shows failing
// scenario, and those it shows safe there.
func recorded(scenario string) (failing, safe []string) {
	m := deploy.Verdicts()
	failing, safe = []string{}, []string{}
	for _, s := range m.Strategies {
		if v, ok := m.Cell(s, scenario); ok {
			if v.Failed() {
				failing = append(failing, s)
			} else {
				safe = append(safe, s)
			}
		}
	}
	return failing, safe
}

// noWrites runs fn and checks that the server s saw no command that
// writes while it ran: every command INFO commandstats counts is one whose
// COMMAND INFO flags have no "write", the server's count of changes since
// the last save did not move, and the commands the check needs did reach
// the server (the test is not vacuous).
func noWrites(t *testing.T, addr string, fn func(), want ...string) {
	t.Helper()
	c, err := redis.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	changes := func() string {
		info, err := redis.String(c.Do("INFO", "persistence"))
		require.NoError(t, err)
		for l := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "rdb_changes_since_last_save:"); ok {
				return v
			}
		}
		t.Fatal("INFO persistence has no rdb_changes_since_last_save")
		return ""
	}
	before := changes()
	_, err = c.Do("CONFIG", "RESETSTAT")
	require.NoError(t, err)
	fn()
	stats, err := redis.String(c.Do("INFO", "commandstats"))
	require.NoError(t, err)
	var seen []string
	for l := range strings.SplitSeq(stats, "\n") {
		name, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "cmdstat_"), ":")
		if !ok || strings.HasPrefix(l, "#") || name == "config|resetstat" {
			continue
		}
		seen = append(seen, name)
		info, err := redis.Values(c.Do("COMMAND", "INFO", name))
		require.NoError(t, err)
		require.Len(t, info, 1, name)
		desc, err := redis.Values(info[0], nil)
		require.NoError(t, err, name)
		flags, err := redis.Strings(desc[2], nil)
		require.NoError(t, err, name)
		assert.NotContains(t, flags, "write", "%s ran on %s, and it writes", name, addr)
	}
	assert.Equal(t, before, changes(), "the data of %s changed", addr)
	for _, w := range want {
		assert.Contains(t, seen, w)
	}
	t.Logf("commands on %s: %s", addr, strings.Join(seen, " "))
}

// The default configuration of redis-server as locklab starts it: no AOF
// and no snapshot, no memory limit, no replica. A restart loses every
// lock, and nothing else is exposed; the check writes nothing.
func TestDefaultConfigRestartExposure(t *testing.T) {
	s := redistest.StartOne(t)
	var rep *deploy.Report
	noWrites(t, s.Addr, func() {
		rep = check(t, locklab.PoolOptions{Addr: s.Addr}, deploy.Options{})
	}, "ping", "info", "config|get", "time", "role")
	assert.Equal(t, map[string]deploy.Status{
		deploy.CheckEviction: deploy.NotExposed, deploy.CheckPersistence: deploy.Exposed,
		deploy.CheckFailover: deploy.NotExposed, deploy.CheckCluster: deploy.NotExposed,
		deploy.CheckClock: deploy.NotExposed, deploy.CheckRTT: deploy.NotExposed,
	}, status(rep))
	assert.Equal(t, "redis://"+s.Addr, rep.Target)
	assert.Equal(t, "standalone", rep.Mode)
	assert.Equal(t, "master", rep.Role)
	assert.Zero(t, rep.Replicas)
	assert.True(t, strings.HasPrefix(rep.Version, "7."), rep.Version)

	e := exposure(t, rep, deploy.CheckPersistence)
	assert.Equal(t, map[string]string{"appendonly": "no", "save": ""}, e.Settings)
	assert.Contains(t, e.Finding, "appendonly no")
	assert.Equal(t, []string{"restart-loses-lock", "redlock-restart"}, e.Scenarios)
	fails, safe := recorded("restart-loses-lock")
	require.NotEmpty(t, fails)
	assert.Equal(t, fails, failingStrategies(e, "restart-loses-lock"), "the recorded matrix's failures")
	assert.Equal(t, []string{"redlock"}, failingStrategies(e, "redlock-restart"))
	assert.Equal(t, safe, e.Safe, "a strategy safe in restart-loses-lock and not in redlock-restart stays safe")
	for _, f := range e.Failing {
		assert.Equal(t, deploy.OutcomeViolated, f.Outcome)
		assert.Equal(t, "locklab demo "+f.Scenario+" -s "+f.Strategy+" --schedule '"+f.Schedule+"'", f.Replay)
		assert.Contains(t, f.Schedule, "restart(n")
	}

	ev := exposure(t, rep, deploy.CheckEviction)
	assert.Equal(t, "noeviction", ev.Settings["maxmemory-policy"])
	fo := exposure(t, rep, deploy.CheckFailover)
	assert.Equal(t, map[string]string{"role": "master", "replicas": "0"}, fo.Settings)
	cl := exposure(t, rep, deploy.CheckClock)
	// The same machine's clock: off by no more than the measure's own
	// uncertainty (half the round trip, however slow a loaded machine
	// makes it), and TIME's microseconds.
	assert.LessOrEqual(t, rep.Clock.Offset.Abs(), rep.Clock.Uncertainty+time.Millisecond, "the same machine's clock")
	assert.Positive(t, rep.Clock.Uncertainty)
	assert.Equal(t, []string{"clock-skew"}, cl.Scenarios)
	assert.Len(t, rep.RTT.Samples, deploy.DefaultPings)
	assert.Positive(t, rep.RTT.Median)
	assert.Equal(t, 50*time.Millisecond, rep.RTT.NodeTimeout, "redlock's for a 30s TTL")
}

// appendonly yes with appendfsync always keeps the locks through a
// restart; everysec and no do not.
func TestAppendFsync(t *testing.T) {
	p, err := redisproc.Start(redisproc.Options{AppendOnly: true, AppendFsync: "always"})
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	po := locklab.PoolOptions{Addr: p.Addr}
	rep := check(t, po, deploy.Options{})
	e := exposure(t, rep, deploy.CheckPersistence)
	assert.Equal(t, deploy.NotExposed, e.Status, e.Finding)
	assert.Equal(t, map[string]string{"appendonly": "yes", "appendfsync": "always"}, e.Settings)
	// What is at stake is listed all the same.
	assert.Equal(t, failingStrategiesOf("restart-loses-lock"), failingStrategies(e, "restart-loses-lock"))

	c, err := redis.Dial("tcp", p.Addr)
	require.NoError(t, err)
	defer c.Close()
	for _, fsync := range []string{"everysec", "no"} {
		_, err := c.Do("CONFIG", "SET", "appendfsync", fsync)
		require.NoError(t, err)
		e := exposure(t, check(t, po, deploy.Options{}), deploy.CheckPersistence)
		assert.Equal(t, deploy.Exposed, e.Status, fsync)
		assert.Equal(t, fsync, e.Settings["appendfsync"])
	}
	_, err = c.Do("CONFIG", "SET", "appendonly", "no")
	require.NoError(t, err)
	_, err = c.Do("CONFIG", "SET", "save", "3600 1")
	require.NoError(t, err)
	e = exposure(t, check(t, po, deploy.Options{}), deploy.CheckPersistence)
	assert.Equal(t, deploy.Exposed, e.Status)
	assert.Contains(t, e.Finding, `RDB snapshots only (save "3600 1")`)
}

func failingStrategiesOf(scenario string) []string {
	f, _ := recorded(scenario)
	return f
}

// A memory limit with a policy that evicts: a held lock's key can go as
// it would in a restart; with noeviction or without a limit it cannot.
func TestEviction(t *testing.T) {
	p, err := redisproc.Start(redisproc.Options{Args: []string{"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"}})
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	po := locklab.PoolOptions{Addr: p.Addr}
	var rep *deploy.Report
	noWrites(t, p.Addr, func() { rep = check(t, po, deploy.Options{}) })
	e := exposure(t, rep, deploy.CheckEviction)
	assert.Equal(t, deploy.Exposed, e.Status, e.Finding)
	assert.Equal(t, map[string]string{"maxmemory-policy": "allkeys-lru", "maxmemory": "104857600"}, e.Settings)
	assert.Contains(t, e.Finding, "maxmemory 100mb")
	assert.Equal(t, []string{"restart-loses-lock", "redlock-clock-jump"}, e.Scenarios)
	assert.Equal(t, failingStrategiesOf("restart-loses-lock"), failingStrategies(e, "restart-loses-lock"))
	assert.Equal(t, []string{"redlock"}, failingStrategies(e, "redlock-clock-jump"))

	c, err := redis.Dial("tcp", p.Addr)
	require.NoError(t, err)
	defer c.Close()
	for _, tc := range []struct {
		set  []any
		want deploy.Status
		says string
	}{
		{[]any{"maxmemory-policy", "volatile-ttl"}, deploy.Exposed, "keys with a TTL"},
		{[]any{"maxmemory", "0"}, deploy.NotExposed, "no memory limit"},
		{[]any{"maxmemory", "1gb", "maxmemory-policy", "noeviction"}, deploy.NotExposed, "evicts no key"},
	} {
		_, err := c.Do("CONFIG", append([]any{"SET"}, tc.set...)...)
		require.NoError(t, err)
		e := exposure(t, check(t, po, deploy.Options{}), deploy.CheckEviction)
		assert.Equal(t, tc.want, e.Status, "%v: %s", tc.set, e.Finding)
		assert.Contains(t, e.Finding, tc.says)
	}
}

// A master with an asynchronous replica: a failover can promote a replica
// that never saw a lock. Only the strategy that waits for the replica's
// acknowledgement stays safe. The replica itself is exposed too.
func TestReplicaFailoverExposure(t *testing.T) {
	m := redistest.StartOne(t)
	r := redistest.StartReplica(t, m)
	var rep *deploy.Report
	noWrites(t, m.Addr, func() { rep = check(t, locklab.PoolOptions{Addr: m.Addr}, deploy.Options{}) })
	e := exposure(t, rep, deploy.CheckFailover)
	assert.Equal(t, deploy.Exposed, e.Status, e.Finding)
	assert.Equal(t, 1, rep.Replicas)
	assert.Equal(t, map[string]string{"role": "master", "replicas": "1"}, e.Settings)
	fails, safe := recorded("failover-loses-lock")
	assert.Equal(t, fails, failingStrategies(e, "failover-loses-lock"))
	assert.Equal(t, safe, e.Safe)
	assert.Contains(t, e.Safe, "set-nx-px-wait")
	assert.Contains(t, failingStrategies(e, "failover-loses-lock"), "set-nx-px")

	rr := check(t, locklab.PoolOptions{Addr: r.Addr}, deploy.Options{})
	re := exposure(t, rr, deploy.CheckFailover)
	assert.Equal(t, "replica", rr.Role)
	assert.Equal(t, deploy.Exposed, re.Status)
	assert.Equal(t, m.Addr, re.Settings["master"])
}

// --addr at a Sentinel: its masters are listed, the one it watches is
// checked with the same credentials, and failover is exposed; the master
// read directly says Sentinels watch it.
func TestSentinel(t *testing.T) {
	g := redistest.StartSentinelGroup(t, "locks")
	var rep *deploy.Report
	noWrites(t, g.Master.Addr, func() {
		rep = check(t, locklab.PoolOptions{Addr: g.Sentinels[0].Addr}, deploy.Options{})
	}, "config|get", "time")
	require.NotNil(t, rep.Sentinel)
	require.Len(t, rep.Sentinel.Masters, 1)
	sm := rep.Sentinel.Masters[0]
	assert.Equal(t, "locks", sm.Name)
	assert.Equal(t, g.Master.Addr, sm.Addr)
	assert.Equal(t, 2, sm.Replicas)
	assert.Equal(t, 3, sm.Sentinels)
	assert.Equal(t, 2, sm.Quorum)
	assert.Equal(t, "locks", rep.Sentinel.Checked)
	assert.Equal(t, g.Master.Addr, rep.Addr)
	assert.Equal(t, "master", rep.Role, "the master's own role")
	assert.Equal(t, map[string]deploy.Status{
		deploy.CheckEviction: deploy.NotExposed, deploy.CheckPersistence: deploy.Exposed,
		deploy.CheckFailover: deploy.Exposed, deploy.CheckCluster: deploy.NotExposed,
		deploy.CheckClock: deploy.NotExposed, deploy.CheckRTT: deploy.NotExposed,
	}, status(rep))
	e := exposure(t, rep, deploy.CheckFailover)
	assert.Contains(t, e.Finding, "3 Sentinels watch master locks")
	assert.Equal(t, failingStrategiesOf("failover-loses-lock"), failingStrategies(e, "failover-loses-lock"))

	direct := exposure(t, check(t, locklab.PoolOptions{Addr: g.Master.Addr}, deploy.Options{}), deploy.CheckFailover)
	assert.Equal(t, deploy.Exposed, direct.Status)
	assert.Contains(t, direct.Finding, "watched by 3 Sentinels")

	_, err := deploy.CheckPool(context.Background(), locklab.PoolOptions{Addr: g.Sentinels[1].Addr}, deploy.Options{MasterName: "other"})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.ErrorContains(t, err, `no master named "other"; it watches locks`)

	// Without a way to the master, the Sentinel's own answer is all.
	pool := locklab.NewPool(g.Sentinels[2].Addr)
	defer pool.Close()
	only, err := deploy.Check(context.Background(), pool, deploy.Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]deploy.Status{
		deploy.CheckEviction: deploy.Unknown, deploy.CheckPersistence: deploy.Unknown,
		deploy.CheckFailover: deploy.Exposed, deploy.CheckCluster: deploy.Unknown,
		deploy.CheckClock: deploy.Unknown, deploy.CheckRTT: deploy.Unknown,
	}, status(only))
}

// A cluster-mode node that serves every slot alone: cluster mode is
// exposed, the strategies that refuse a cluster fail there, and with no
// replica nothing fails over.
func TestClusterSingleNode(t *testing.T) {
	cl := redistest.StartClusterOptions(t, redisproc.ClusterOptions{Masters: 1, Replicas: -1})
	addr := cl.Nodes[0].Addr
	var rep *deploy.Report
	noWrites(t, addr, func() { rep = check(t, locklab.PoolOptions{Addr: addr}, deploy.Options{}) }, "cluster|info", "cluster|nodes")
	assert.Equal(t, "cluster", rep.Mode)
	require.NotNil(t, rep.Cluster)
	assert.Equal(t, deploy.Cluster{State: "ok", SlotsAssigned: 16384, Masters: 1, KnownNodes: 1, Replicas: 0}, *rep.Cluster)
	e := exposure(t, rep, deploy.CheckCluster)
	assert.Equal(t, deploy.Exposed, e.Status, e.Finding)
	assert.Contains(t, e.Finding, "CROSSSLOT")
	assert.Empty(t, e.Scenarios, "no matrix scenario plays cluster mode")
	require.Len(t, e.Failing, 1)
	assert.Equal(t, "redlock", e.Failing[0].Strategy)
	assert.Contains(t, e.Failing[0].Reason, "independent masters")
	assert.Len(t, e.Safe, len(deploy.Strategies())-1)
	assert.Equal(t, deploy.NotExposed, exposure(t, rep, deploy.CheckFailover).Status)

	// With a replica in the cluster, a master fails over to it.
	withReplica := redistest.StartClusterOptions(t, redisproc.ClusterOptions{Masters: 3, Replicas: 1})
	rep = check(t, locklab.PoolOptions{Addr: withReplica.Nodes[0].Addr}, deploy.Options{})
	assert.Equal(t, 3, rep.Cluster.Replicas)
	f := exposure(t, rep, deploy.CheckFailover)
	assert.Equal(t, deploy.Exposed, f.Status, f.Finding)
	assert.Equal(t, "3", f.Settings["cluster-replicas"])
}

// The server's clock against this host's: a host clock 5s behind makes
// the server 5s ahead, which the timestamp locks cannot take.
func TestClockSkew(t *testing.T) {
	s := redistest.StartOne(t)
	behind := locklab.ClockFunc(func() time.Time { return time.Now().Add(-5 * time.Second) })
	rep := check(t, locklab.PoolOptions{Addr: s.Addr}, deploy.Options{Clock: behind})
	e := exposure(t, rep, deploy.CheckClock)
	assert.Equal(t, deploy.Exposed, e.Status, e.Finding)
	assert.InDelta(t, 5*time.Second, rep.Clock.Offset, float64(rep.Clock.Uncertainty+time.Millisecond))
	assert.Contains(t, e.Finding, "ahead of this host's")
	fails, safe := recorded("clock-skew")
	assert.Equal(t, fails, failingStrategies(e, "clock-skew"))
	assert.Equal(t, []string{"setnx-del", "setnx-getset", "setnx-getset-lua"}, fails,
		"the timestamp locks whose stamps go stale (setnx-forever's never does)")
	assert.Equal(t, safe, e.Safe)
	for _, f := range e.Failing {
		assert.Contains(t, f.Replay, "skew(c2,")
	}
	// Within a generous bound it is not exposed.
	e = exposure(t, check(t, locklab.PoolOptions{Addr: s.Addr}, deploy.Options{Clock: behind, MaxSkew: 10 * time.Second}), deploy.CheckClock)
	assert.Equal(t, deploy.NotExposed, e.Status, e.Finding)
}

// The round trip against Redlock's node timeout: a node timeout under the
// loopback round trip makes every Redlock round count the server as
// failed; the single-node strategies do not care.
func TestRTTAgainstNodeTimeout(t *testing.T) {
	s := redistest.StartOne(t)
	po := locklab.PoolOptions{Addr: s.Addr}
	rep := check(t, po, deploy.Options{TTL: time.Second, Pings: 7})
	assert.Len(t, rep.RTT.Samples, 7)
	assert.Equal(t, 20*time.Millisecond, rep.RTT.NodeTimeout, "a fiftieth of 1s")
	assert.Equal(t, deploy.NotExposed, exposure(t, rep, deploy.CheckRTT).Status)

	rep = check(t, po, deploy.Options{NodeTimeout: time.Nanosecond})
	e := exposure(t, rep, deploy.CheckRTT)
	assert.Equal(t, deploy.Exposed, e.Status, e.Finding)
	require.Len(t, e.Failing, 1)
	assert.Equal(t, "redlock", e.Failing[0].Strategy)
	assert.Len(t, e.Safe, len(deploy.Strategies())-1)
	assert.Equal(t, "1ns", e.Settings["node-timeout"])
}

// A command the user may not run, or that the server renamed away, leaves
// its check unknown, not failed.
func TestRefusedCommandsAreUnknown(t *testing.T) {
	p, err := redisproc.Start(redisproc.Options{AppendOnly: true, AppendFsync: "always"})
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	c, err := redis.Dial("tcp", p.Addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Do("ACL", "SETUSER", "noconfig", "on", ">pw", "~*", "&*", "+@all", "-config")
	require.NoError(t, err)
	_, err = c.Do("ACL", "SETUSER", "pinger", "on", ">pw", "-@all", "+ping", "+time")
	require.NoError(t, err)

	var rep *deploy.Report
	noWrites(t, p.Addr, func() {
		rep = check(t, locklab.PoolOptions{Addr: p.Addr, Username: "noconfig", Password: "pw"}, deploy.Options{})
	}, "info", "time")
	e := exposure(t, rep, deploy.CheckPersistence)
	assert.Equal(t, deploy.Unknown, e.Status)
	assert.Contains(t, e.Finding, "appendonly yes, appendfsync unknown: CONFIG GET appendfsync refused: NOPERM")
	ev := exposure(t, rep, deploy.CheckEviction)
	assert.Equal(t, deploy.NotExposed, ev.Status, "INFO tells the policy: %s", ev.Finding)

	rep = check(t, locklab.PoolOptions{Addr: p.Addr, Username: "pinger", Password: "pw"}, deploy.Options{})
	assert.Equal(t, map[string]deploy.Status{
		deploy.CheckEviction: deploy.Unknown, deploy.CheckPersistence: deploy.Unknown,
		deploy.CheckFailover: deploy.Unknown, deploy.CheckCluster: deploy.Unknown,
		deploy.CheckClock: deploy.NotExposed, deploy.CheckRTT: deploy.NotExposed,
	}, status(rep))
	for _, e := range rep.Exposures[:4] {
		assert.Contains(t, e.Finding, "NOPERM", e.Check)
	}

	// A managed service's renamed CONFIG.
	renamed, err := redisproc.Start(redisproc.Options{AppendOnly: true, AppendFsync: "always",
		Args: []string{"--rename-command", "CONFIG", "CONFIG_b840fc02d524"}})
	require.NoError(t, err)
	t.Cleanup(renamed.Stop)
	rep = check(t, locklab.PoolOptions{Addr: renamed.Addr}, deploy.Options{})
	e = exposure(t, rep, deploy.CheckPersistence)
	assert.Equal(t, deploy.Unknown, e.Status)
	assert.Contains(t, e.Finding, "unknown command")
	assert.Equal(t, deploy.NotExposed, exposure(t, rep, deploy.CheckEviction).Status)
}

// The URL forms of the other commands: an ACL user and a database, a
// password alone, TLS.
func TestURLForms(t *testing.T) {
	s := redistest.StartTLS(t)
	s.ACLUser(t, "alice", "s3cret")
	po, err := locklab.ParseURL("rediss://alice:s3cret@" + s.TLSAddr + "/2")
	require.NoError(t, err)
	po.TLSConfig.RootCAs = s.CA
	rep := check(t, po, deploy.Options{})
	assert.Equal(t, "rediss://alice:xxxxx@"+s.TLSAddr+"/2", rep.Target)
	assert.Equal(t, deploy.Exposed, exposure(t, rep, deploy.CheckPersistence).Status)

	po.TLSConfig.RootCAs = s.OtherCA
	_, err = deploy.CheckPool(context.Background(), po, deploy.Options{})
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.ErrorContains(t, err, "certificate")

	s.Do(t, "CONFIG", "SET", "requirepass", "pw")
	_, err = deploy.CheckPool(context.Background(), locklab.PoolOptions{Addr: s.Addr, Password: "pw"}, deploy.Options{})
	require.NoError(t, err)
	_, err = deploy.CheckPool(context.Background(), locklab.PoolOptions{Addr: s.Addr, Password: "wrong"}, deploy.Options{})
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.ErrorContains(t, err, "WRONGPASS")
	_, err = deploy.CheckPool(context.Background(), locklab.PoolOptions{Addr: s.Addr}, deploy.Options{})
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.ErrorContains(t, err, "NOAUTH")
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	_, err = deploy.CheckPool(context.Background(), locklab.PoolOptions{Addr: addr}, deploy.Options{})
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.ErrorContains(t, err, "connection refused")

	_, err = deploy.CheckPool(context.Background(), locklab.PoolOptions{Addr: addr}, deploy.Options{Strategies: []string{"nosuch"}})
	require.ErrorIs(t, err, locklab.ErrInvalid)
}

// Options.Strategies narrows the lists to the strategies asked about.
func TestStrategiesFilter(t *testing.T) {
	s := redistest.StartOne(t)
	rep := check(t, locklab.PoolOptions{Addr: s.Addr}, deploy.Options{Strategies: []string{"set-nx-px", "redlock"}})
	e := exposure(t, rep, deploy.CheckPersistence)
	var got []string
	for _, f := range e.Failing {
		got = append(got, f.Strategy+" × "+f.Scenario)
	}
	slices.Sort(got)
	assert.Equal(t, []string{"redlock × redlock-restart", "redlock × restart-loses-lock", "set-nx-px × restart-loses-lock"}, got)
	assert.Empty(t, e.Safe)
}

// The JSON names its fields in lower case, durations in nanoseconds.
func TestReportJSON(t *testing.T) {
	s := redistest.StartOne(t)
	b, err := json.Marshal(check(t, locklab.PoolOptions{Addr: s.Addr}, deploy.Options{}))
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	for _, k := range []string{"target", "version", "mode", "role", "replicas", "rtt", "clock", "exposures"} {
		assert.Contains(t, raw, k)
	}
	rtt := raw["rtt"].(map[string]any)
	for _, k := range []string{"median_ns", "samples_ns", "node_timeout_ns", "ttl_ns"} {
		assert.Contains(t, rtt, k)
	}
	assert.Equal(t, float64(50*time.Millisecond), rtt["node_timeout_ns"])
	ex := raw["exposures"].([]any)[1].(map[string]any)
	assert.Equal(t, "persistence", ex["check"])
	f := ex["failing"].([]any)[0].(map[string]any)
	for _, k := range []string{"strategy", "scenario", "outcome", "property", "schedule", "replay"} {
		assert.Contains(t, f, k)
	}
}
