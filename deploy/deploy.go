// Package deploy looks at a Redis deployment, without writing anything, and
// tells which scenarios of locklab's verdict matrix it is exposed to: a
// maxmemory-policy that evicts lock keys, persistence that a restart loses
// locks through, asynchronous replicas a failover promotes, cluster mode,
// the server's clock against this host's, and the round trip against
// Redlock's node timeout. For each, the report names the strategies that
// stay safe there and those the recorded matrix shows failing, with the
// command line that replays each failing cell.
//
//	rep, err := deploy.CheckPool(ctx, locklab.PoolOptions{Addr: "10.0.0.5:6379"}, deploy.Options{})
//
// The server is asked PING, INFO, CONFIG GET, ROLE, TIME, PUBSUB NUMSUB and,
// on a cluster, CLUSTER INFO and CLUSTER NODES; a Sentinel is asked
// SENTINEL MASTERS, and the master it names is checked. None of them
// changes data or settings. A command the server refuses (an ACL user
// without the permission: NOPERM; a managed service that renamed CONFIG)
// leaves what it would have told unknown, which the report says; it is
// not an error. Only a server that cannot be reached, or refuses the
// connection itself (a wrong password), is.
//
// The safe and failing strategies come from the verdict matrix recorded in
// docs/matrix.md (Verdicts), and, for cluster mode and the node timeout,
// which no matrix scenario plays, from the strategies' own descriptions
// (strategies.Description.NoCluster and Options).
package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/strategies"
)

// The checks, in the order a report lists them.
const (
	CheckEviction    = "eviction"
	CheckPersistence = "persistence"
	CheckFailover    = "failover"
	CheckCluster     = "cluster"
	CheckClock       = "clock"
	CheckRTT         = "rtt"
)

// Checks are the names of the checks, in report order.
var Checks = []string{CheckEviction, CheckPersistence, CheckFailover, CheckCluster, CheckClock, CheckRTT}

// CheckScenarios are the matrix scenarios each check decides the exposure
// to: a lock key evicted is a key the server forgets while it is held, as
// a restart without persistence forgets it, and as a clock jump expires it
// early on one of Redlock's nodes. Cluster mode and the round trip have
// none: no matrix scenario plays them.
var CheckScenarios = map[string][]string{
	CheckEviction:    {"restart-loses-lock", "redlock-clock-jump"},
	CheckPersistence: {"restart-loses-lock", "redlock-restart"},
	CheckFailover:    {"failover-loses-lock"},
	CheckClock:       {"clock-skew"},
}

// Status is what a check found.
type Status string

// The statuses.
const (
	// Exposed: the deployment is configured so that the check's scenarios
	// can happen.
	Exposed Status = "exposed"
	// NotExposed: it is not.
	NotExposed Status = "not-exposed"
	// Unknown: the server refused a command the check needs (NOPERM, a
	// renamed command); Finding says which.
	Unknown Status = "unknown"
)

// Defaults of Options.
const (
	DefaultTTL     = 30 * time.Second
	DefaultMaxSkew = 100 * time.Millisecond
	DefaultPings   = 5
)

// Options tune a check.
type Options struct {
	// Target names the server in the report (CheckPool: its URL, password
	// hidden).
	Target string
	// TTL is the lease TTL the locks are taken with: Redlock's node
	// timeout is a fiftieth of it (within its bounds) unless NodeTimeout
	// is set. Default DefaultTTL (30s, the matrix's).
	TTL time.Duration
	// NodeTimeout is the Config.NodeTimeout Redlock runs with; 0: its
	// default for TTL.
	NodeTimeout time.Duration
	// MaxSkew is how far the server's clock may be from this host's,
	// beyond the measurement's uncertainty, before the timestamp locks
	// count as exposed. Default DefaultMaxSkew (100ms).
	MaxSkew time.Duration
	// Pings is how many PINGs the round trip is the median of. Default
	// DefaultPings (5).
	Pings int
	// Clock is this host's clock, which the server's TIME is compared
	// with. Default locklab.SystemClock.
	Clock locklab.Clock
	// MasterName picks, when the server is a Sentinel, the master to check
	// among those it watches; it may be empty when it watches one.
	MasterName string
	// Master connects to the master a Sentinel names, at "host:port"; a
	// returned source that is an io.Closer is closed after the check.
	// CheckPool dials it with the Sentinel's URL's user, password, TLS
	// and database (MasterAuth replaces the user and password). Nil: the
	// master is not checked, and what it would have told is unknown.
	Master func(addr string) (locklab.ConnSource, error)
	// MasterAuth, when set, is the user and password CheckPool logs in to
	// the master a Sentinel names with, in place of those of the
	// Sentinel's URL, which then reach the Sentinel alone: a Sentinel and
	// its masters need not share a password (sentinel auth-pass). Its
	// zero value sends the master no AUTH. As go-redis's
	// FailoverOptions: Username and Password for the master,
	// SentinelUsername and SentinelPassword for the Sentinel.
	MasterAuth *Auth
	// Strategies restricts the report's safe and failing lists to these
	// strategies (default: every strategy of the recorded matrix).
	Strategies []string
}

// Auth is an ACL user and its password; a password alone (Username
// empty) is the default user's.
type Auth struct {
	Username, Password string
}

// NotSentinelError is the error of Options.MasterName or
// Options.MasterAuth set for a server that is not a Sentinel, which would
// ignore them. errors.Is(err, locklab.ErrInvalid) holds.
type NotSentinelError struct {
	// Mode is the server's redis_mode: "standalone" or "cluster".
	Mode string
}

func (e *NotSentinelError) Error() string {
	return "deploy: the server runs in " + e.Mode + " mode, not as a Sentinel: a master name and a master's credentials are for a Sentinel"
}

// Is makes the error locklab.ErrInvalid.
func (e *NotSentinelError) Is(target error) bool { return target == locklab.ErrInvalid }

func (o Options) withDefaults() (Options, error) {
	if o.TTL < 0 || o.NodeTimeout < 0 || o.MaxSkew < 0 || o.Pings < 0 {
		return o, lockkit.Invalid("deploy: negative TTL, NodeTimeout, MaxSkew or Pings")
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.MaxSkew == 0 {
		o.MaxSkew = DefaultMaxSkew
	}
	if o.Pings == 0 {
		o.Pings = DefaultPings
	}
	if o.Clock == nil {
		o.Clock = locklab.SystemClock
	}
	known := Strategies()
	for _, s := range o.Strategies {
		if !slices.Contains(known, s) {
			return o, lockkit.Invalid("deploy: unknown strategy %q; the strategies are %s", s, strings.Join(known, ", "))
		}
	}
	return o, nil
}

// Strategies are the strategies a report can name: those of the recorded
// matrix that are registered and lock on Redis, in its order.
func Strategies() []string {
	var out []string
	for _, s := range Verdicts().Strategies {
		if d, err := strategies.Info(s); err == nil && onRedis(d) {
			out = append(out, s)
		}
	}
	return out
}

// Report is what a check found.
type Report struct {
	// Target is the server asked, as Options.Target names it.
	Target string `json:"target"`
	// Addr is the address of the server whose settings were read when it
	// is not Target: the master a Sentinel named.
	Addr string `json:"addr,omitempty"`
	// Version is the server's redis_version ("" when INFO was refused).
	Version string `json:"version,omitempty"`
	// Mode is redis_mode: "standalone" or "cluster" ("" when unknown).
	Mode string `json:"mode"`
	// Role is "master" or "replica" ("" when unknown).
	Role string `json:"role,omitempty"`
	// Replicas is how many replicas the server has (-1: unknown).
	Replicas int `json:"replicas"`
	// Sentinel is the Sentinel Target is, and what it watches.
	Sentinel *Sentinel `json:"sentinel,omitempty"`
	// Cluster is CLUSTER INFO's, in cluster mode.
	Cluster *Cluster `json:"cluster,omitempty"`
	RTT     RTT      `json:"rtt"`
	Clock   Clock    `json:"clock"`
	// Exposures are the checks' findings, in the order of Checks.
	Exposures []Exposure `json:"exposures"`
}

// Exposure returns the finding of check name.
func (r *Report) Exposure(name string) (Exposure, bool) {
	for _, e := range r.Exposures {
		if e.Check == name {
			return e, true
		}
	}
	return Exposure{}, false
}

// Exposure is one check's finding.
type Exposure struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	// Finding says in one line what was read and what it means.
	Finding string `json:"finding"`
	// Settings are the values the check read, by name
	// ("maxmemory-policy", "appendfsync", "role", ...).
	Settings map[string]string `json:"settings,omitempty"`
	// Scenarios are CheckScenarios[Check].
	Scenarios []string `json:"scenarios"`
	// Failing are the strategies that fail there, one entry per failing
	// cell of the recorded matrix; for cluster mode and the round trip,
	// one per strategy with the reason.
	Failing []Failure `json:"failing"`
	// Safe are the strategies that stay safe in every scenario of the
	// check that applies to them.
	Safe []string `json:"safe"`
}

// Failure is a strategy that fails where a check looks.
type Failure struct {
	Strategy string `json:"strategy"`
	// Scenario, Outcome, Property and Schedule are the recorded cell's;
	// Replay is the command line that replays it.
	Scenario string `json:"scenario,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	Property string `json:"property,omitempty"`
	Schedule string `json:"schedule,omitempty"`
	Replay   string `json:"replay,omitempty"`
	// Reason says why, where no matrix cell shows it.
	Reason string `json:"reason,omitempty"`
}

// Sentinel is what a Sentinel told.
type Sentinel struct {
	// Masters are those it watches (SENTINEL MASTERS).
	Masters []SentinelMaster `json:"masters"`
	// Checked is the name of the master the report checked.
	Checked string `json:"checked"`
}

// SentinelMaster is one master a Sentinel watches.
type SentinelMaster struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	// Flags are the Sentinel's ("master", "s_down,master", ...).
	Flags     string `json:"flags"`
	Replicas  int    `json:"replicas"`
	Sentinels int    `json:"sentinels"`
	Quorum    int    `json:"quorum"`
}

// Cluster is what CLUSTER INFO and CLUSTER NODES told.
type Cluster struct {
	State         string `json:"state"`
	SlotsAssigned int    `json:"slots_assigned"`
	// Masters is cluster_size: the masters that serve slots.
	Masters    int `json:"masters"`
	KnownNodes int `json:"known_nodes"`
	// Replicas is how many nodes CLUSTER NODES lists as replicas (-1:
	// unknown).
	Replicas int `json:"replicas"`
}

// RTT is the round trip to the server.
type RTT struct {
	// Median of Samples, one per PING on one connection.
	Median  time.Duration   `json:"median_ns"`
	Samples []time.Duration `json:"samples_ns"`
	// NodeTimeout is Redlock's for TTL (Options.NodeTimeout, or its
	// default for TTL).
	NodeTimeout time.Duration `json:"node_timeout_ns"`
	TTL         time.Duration `json:"ttl_ns"`
}

// Clock compares the server's clock (TIME) with this host's.
type Clock struct {
	// Offset is the server's time minus this host's at the moment the
	// server read it (the local reading taken half a round trip after
	// the request was sent); positive: the server is ahead.
	Offset time.Duration `json:"offset_ns"`
	// Uncertainty is half the round trip of the TIME sample used: the
	// server read its clock somewhere within it.
	Uncertainty time.Duration `json:"uncertainty_ns"`
	MaxSkew     time.Duration `json:"max_skew_ns"`
}

// Check reads the server src reaches and reports its exposures. A server
// that cannot be reached, or fails the first PING (a wrong password:
// NOAUTH, WRONGPASS), is an error wrapping locklab.ErrUnavailable; a
// Sentinel that watches several masters, none of them named by
// o.MasterName, is locklab.ErrInvalid. A command refused later leaves its
// check Unknown.
func Check(ctx context.Context, src locklab.ConnSource, o Options) (*Report, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	s, err := open(ctx, src)
	if err != nil {
		return nil, err
	}
	defer s.close()
	rep := &Report{Target: o.Target, Replicas: -1}
	f := &facts{}
	if err := s.info(f); err != nil {
		return nil, err
	}
	if f.mode() == "sentinel" {
		return checkSentinel(ctx, s, rep, o)
	}
	if f.mode() != "" && (o.MasterName != "" || o.MasterAuth != nil) {
		return nil, &NotSentinelError{Mode: f.mode()}
	}
	if err := s.read(f, o); err != nil {
		return nil, err
	}
	rep.fill(f, o)
	return rep, nil
}

// checkSentinel reads the masters Sentinel s watches and checks the one
// o.MasterName names (or the only one).
func checkSentinel(ctx context.Context, s *server, rep *Report, o Options) (*Report, error) {
	masters, err := s.sentinelMasters()
	if err != nil {
		return nil, err
	}
	rep.Sentinel = &Sentinel{Masters: masters}
	var m *SentinelMaster
	for i := range masters {
		if masters[i].Name == o.MasterName || o.MasterName == "" && len(masters) == 1 {
			m = &masters[i]
		}
	}
	if m == nil {
		names := make([]string, len(masters))
		for i, x := range masters {
			names[i] = x.Name
		}
		switch {
		case len(masters) == 0:
			return nil, lockkit.Invalid("deploy: the Sentinel at %s watches no master", rep.Target)
		case o.MasterName == "":
			return nil, lockkit.Invalid("deploy: the Sentinel watches %d masters (%s): name the one to check", len(masters), strings.Join(names, ", "))
		}
		return nil, lockkit.Invalid("deploy: the Sentinel watches no master named %q; it watches %s", o.MasterName, strings.Join(names, ", "))
	}
	rep.Sentinel.Checked = m.Name
	rep.Addr = m.Addr
	f := &facts{sentinel: m}
	if o.Master == nil {
		f.noMaster = "no connection to the master (Options.Master)"
		rep.fill(f, o)
		return rep, nil
	}
	src, err := o.Master(m.Addr)
	if err != nil {
		return nil, lockkit.Unavailable(fmt.Errorf("the master %s at %s: %w", m.Name, m.Addr, err))
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	ms, err := open(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("the master %s at %s that the Sentinel names: %w", m.Name, m.Addr, err)
	}
	defer ms.close()
	if err := ms.info(f); err != nil {
		return nil, err
	}
	if err := ms.read(f, o); err != nil {
		return nil, err
	}
	rep.fill(f, o)
	return rep, nil
}

// CheckPool checks the server po describes (a URL ParseURL read), through
// a pool of its own that it closes. When the server is a Sentinel, the
// master it names is dialled with po's user, password, TLS and database,
// or o.MasterAuth's user and password when set.
func CheckPool(ctx context.Context, po locklab.PoolOptions, o Options) (*Report, error) {
	if o.Target == "" {
		o.Target = po.Redacted()
	}
	pool, err := locklab.NewPoolOptions(po)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if o.Master == nil {
		o.Master = func(addr string) (locklab.ConnSource, error) {
			mo := po
			mo.Addr = addr
			if a := o.MasterAuth; a != nil {
				mo.Username, mo.Password = a.Username, a.Password
			}
			return locklab.NewPoolOptions(mo)
		}
	}
	return Check(ctx, pool, o)
}

// refusal is a command the server answered with an error: a missing
// permission (NOPERM), a command renamed away, a command the mode does not
// have. It leaves what the command would have told unknown.
type refusal struct {
	cmd string
	msg string
}

func (r *refusal) Error() string { return r.cmd + " refused: " + r.msg }

// refused is the refusal err is, if it is one.
func refused(err error) (*refusal, bool) {
	var r *refusal
	ok := errors.As(err, &r)
	return r, ok
}
