// Reading a server: the commands a check sends, none of which writes, and
// the facts they tell.

package deploy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/lockkit"
)

// server is one connection to the server a check reads.
type server struct {
	ctx context.Context
	c   redis.Conn
}

// open takes a connection from src and checks it with a PING: a server
// that cannot be reached, or refuses the connection (NOAUTH, WRONGPASS,
// a TLS failure), is an error wrapping locklab.ErrUnavailable.
func open(ctx context.Context, src locklab.ConnSource) (*server, error) {
	c, err := src.GetContext(ctx)
	if err != nil {
		return nil, lockkit.Unavailable(err)
	}
	s := &server{ctx: ctx, c: c}
	if _, err := redis.DoContext(c, ctx, "PING"); err != nil {
		c.Close()
		return nil, lockkit.Unavailable(err)
	}
	return s, nil
}

func (s *server) close() { s.c.Close() }

// do sends one command. An error reply is a *refusal; any other error (the
// connection failed, the context ended) wraps locklab.ErrUnavailable.
func (s *server) do(cmd string, args ...any) (any, error) {
	v, err := redis.DoContext(s.c, s.ctx, cmd, args...)
	if err == nil {
		return v, nil
	}
	if re, ok := errors.AsType[redis.Error](err); ok {
		name := strings.ToUpper(cmd)
		for i, a := range args {
			if i == 0 {
				name += " " + strings.ToUpper(fmt.Sprint(a)) // a subcommand
			} else {
				name += " " + fmt.Sprint(a)
			}
		}
		return nil, &refusal{cmd: name, msg: string(re)}
	}
	return nil, lockkit.Unavailable(fmt.Errorf("%s: %w", cmd, err))
}

// facts are what a check read from a server; what a refused command would
// have told is missing, with the refusal.
type facts struct {
	info    map[string]string
	infoErr *refusal
	// config holds CONFIG GET's answers; configErr the refusals.
	config    map[string]string
	configErr map[string]*refusal
	// role is "master" or "replica"; master is a replica's master.
	role, master string
	replicas     int // -1: unknown
	roleErr      *refusal
	// sentinelSubs is how many Sentinels listen on the server's hello
	// channel (-1: unknown).
	sentinelSubs int
	cluster      *Cluster
	clusterErr   *refusal
	rtt          []time.Duration
	clock        Clock
	clockErr     *refusal
	// sentinel is the master a Sentinel named, when the check came
	// through one; noMaster says why that master was not read.
	sentinel *SentinelMaster
	noMaster string
}

// mode is INFO's redis_mode, "" when INFO was refused.
func (f *facts) mode() string { return f.info["redis_mode"] }

// info reads INFO (its default sections).
func (s *server) info(f *facts) error {
	v, err := s.do("INFO")
	if r, ok := refused(err); ok {
		f.infoErr = r
		return nil
	}
	if err != nil {
		return err
	}
	text, err := redis.String(v, nil)
	if err != nil {
		return lockkit.Unavailable(fmt.Errorf("INFO: %w", err))
	}
	f.info = parseInfo(text)
	return nil
}

// parseInfo reads INFO's "field:value" lines.
func parseInfo(text string) map[string]string {
	out := map[string]string{}
	for l := range strings.SplitSeq(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if k, v, ok := strings.Cut(l, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// configNames are the settings a check reads with CONFIG GET.
var configNames = []string{"maxmemory-policy", "maxmemory", "appendonly", "appendfsync", "save"}

// read reads everything a data node (standalone, cluster or a Sentinel's
// master) tells: the round trip, the clock, the settings, the role, the
// Sentinels listening, the cluster.
func (s *server) read(f *facts, o Options) error {
	if err := s.measureRTT(f, o.Pings); err != nil {
		return err
	}
	if err := s.measureClock(f, o.Clock); err != nil {
		return err
	}
	f.config, f.configErr = map[string]string{}, map[string]*refusal{}
	for _, name := range configNames {
		// One parameter per CONFIG GET: servers before 7.0 take one.
		v, err := s.do("CONFIG", "GET", name)
		if r, ok := refused(err); ok {
			f.configErr[name] = r
			continue
		}
		if err != nil {
			return err
		}
		kv, err := redis.StringMap(v, nil)
		val, ok := kv[name]
		if err != nil || !ok {
			f.configErr[name] = &refusal{cmd: "CONFIG GET " + name, msg: "no such parameter"}
			continue
		}
		f.config[name] = val
	}
	if err := s.readRole(f); err != nil {
		return err
	}
	f.sentinelSubs = -1
	if v, err := s.do("PUBSUB", "NUMSUB", sentinelHello); err == nil {
		if kv, err := redis.Int64Map(v, nil); err == nil {
			f.sentinelSubs = int(kv[sentinelHello])
		}
	} else if _, ok := refused(err); !ok {
		return err
	}
	return s.readCluster(f)
}

// sentinelHello is the channel every Sentinel watching a server subscribes
// to on it.
const sentinelHello = "__sentinel__:hello"

// readRole reads ROLE, or, where it is refused (it is @admin and
// @dangerous), INFO's replication section.
func (s *server) readRole(f *facts) error {
	f.replicas = -1
	v, err := s.do("ROLE")
	if r, ok := refused(err); ok {
		f.roleErr = r
		if role := f.info["role"]; role != "" {
			f.role = replicaName(role)
			f.roleErr = nil
			if f.role == "master" {
				if n, err := strconv.Atoi(f.info["connected_slaves"]); err == nil {
					f.replicas = n
				}
			} else if f.info["master_host"] != "" {
				f.master = net.JoinHostPort(f.info["master_host"], f.info["master_port"])
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	vs, err := redis.Values(v, nil)
	if err != nil || len(vs) == 0 {
		f.roleErr = &refusal{cmd: "ROLE", msg: fmt.Sprintf("unexpected answer %v", v)}
		return nil
	}
	role, _ := redis.String(vs[0], nil)
	f.role = replicaName(role)
	switch {
	case role == "master" && len(vs) >= 3:
		// ROLE lists the replicas in sync; INFO counts those still
		// syncing too, which will be.
		reps, _ := redis.Values(vs[2], nil)
		f.replicas = len(reps)
		if n, err := strconv.Atoi(f.info["connected_slaves"]); err == nil {
			f.replicas = max(f.replicas, n)
		}
	case role == "slave" && len(vs) >= 3:
		host, _ := redis.String(vs[1], nil)
		port, _ := redis.Int(vs[2], nil)
		f.master = net.JoinHostPort(host, strconv.Itoa(port))
		f.replicas = 0
		if n, err := strconv.Atoi(f.info["connected_slaves"]); err == nil {
			f.replicas = n // a replica's own replicas
		}
	}
	return nil
}

// replicaName is Redis's "slave" as "replica".
func replicaName(role string) string {
	if role == "slave" {
		return "replica"
	}
	return role
}

// readCluster reads CLUSTER INFO and CLUSTER NODES when INFO says cluster
// mode, or, where INFO was refused, when CLUSTER INFO answers.
func (s *server) readCluster(f *facts) error {
	if f.info != nil && f.info["cluster_enabled"] != "1" {
		return nil
	}
	v, err := s.do("CLUSTER", "INFO")
	if r, ok := refused(err); ok {
		if f.info == nil && strings.Contains(r.msg, "cluster support disabled") {
			return nil
		}
		f.clusterErr = r
		return nil
	}
	if err != nil {
		return err
	}
	text, _ := redis.String(v, nil)
	ci := parseInfo(text)
	atoi := func(k string) int { n, _ := strconv.Atoi(ci[k]); return n }
	f.cluster = &Cluster{State: ci["cluster_state"], SlotsAssigned: atoi("cluster_slots_assigned"),
		Masters: atoi("cluster_size"), KnownNodes: atoi("cluster_known_nodes"), Replicas: -1}
	v, err = s.do("CLUSTER", "NODES")
	if _, ok := refused(err); ok {
		return nil
	}
	if err != nil {
		return err
	}
	text, _ = redis.String(v, nil)
	n := 0
	for l := range strings.SplitSeq(text, "\n") {
		fs := strings.Fields(l)
		if len(fs) < 3 {
			continue
		}
		flags := strings.Split(fs[2], ",")
		if slices.Contains(flags, "slave") || slices.Contains(flags, "replica") {
			n++
		}
	}
	f.cluster.Replicas = n
	return nil
}

// measureRTT times pings PINGs on the connection.
func (s *server) measureRTT(f *facts, pings int) error {
	for range pings {
		t := time.Now()
		if _, err := s.do("PING"); err != nil {
			if r, ok := refused(err); ok {
				return lockkit.Unavailable(r)
			}
			return err
		}
		f.rtt = append(f.rtt, time.Since(t))
	}
	return nil
}

// clockSamples is how many TIMEs the clock is read with; the one with the
// shortest round trip is used.
const clockSamples = 3

// measureClock compares the server's TIME with clock: the local reading is
// taken at the middle of the round trip, and half the round trip is the
// uncertainty.
func (s *server) measureClock(f *facts, clock locklab.Clock) error {
	best := Clock{Uncertainty: -1}
	for range clockSamples {
		local := clock.Now()
		t := time.Now()
		v, err := s.do("TIME")
		rtt := time.Since(t)
		if r, ok := refused(err); ok {
			f.clockErr = r
			return nil
		}
		if err != nil {
			return err
		}
		tv, err := redis.Int64s(v, nil)
		if err != nil || len(tv) != 2 {
			f.clockErr = &refusal{cmd: "TIME", msg: fmt.Sprintf("unexpected answer %v", v)}
			return nil
		}
		server := time.Unix(tv[0], tv[1]*1000)
		c := Clock{Offset: server.Sub(local.Add(rtt / 2)), Uncertainty: rtt / 2}
		if best.Uncertainty < 0 || c.Uncertainty < best.Uncertainty {
			best = c
		}
	}
	f.clock = best
	return nil
}

// sentinelMasters reads SENTINEL MASTERS.
func (s *server) sentinelMasters() ([]SentinelMaster, error) {
	v, err := s.do("SENTINEL", "MASTERS")
	if err != nil {
		if r, ok := refused(err); ok {
			return nil, lockkit.Unavailable(r)
		}
		return nil, err
	}
	vs, err := redis.Values(v, nil)
	if err != nil {
		return nil, lockkit.Unavailable(fmt.Errorf("SENTINEL MASTERS: %w", err))
	}
	var out []SentinelMaster
	for _, x := range vs {
		kv, err := redis.StringMap(x, nil)
		if err != nil {
			return nil, lockkit.Unavailable(fmt.Errorf("SENTINEL MASTERS: %w", err))
		}
		atoi := func(k string) int { n, _ := strconv.Atoi(kv[k]); return n }
		out = append(out, SentinelMaster{Name: kv["name"], Addr: net.JoinHostPort(kv["ip"], kv["port"]),
			Flags: kv["flags"], Replicas: atoi("num-slaves"), Sentinels: atoi("num-other-sentinels") + 1,
			Quorum: atoi("quorum")})
	}
	slices.SortFunc(out, func(a, b SentinelMaster) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
