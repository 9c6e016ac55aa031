// Package strategies is the registry of lock algorithms: every strategy in
// locklab has a name, and New builds a ready locklab.Locker from that name and
// a locklab.Config.
//
//	l, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
//
// Names lists what is registered, sorted; Info describes one strategy: its
// family, a one-line summary, where it comes from, the properties it has, and
// the weaknesses it is known for. Most registered strategies are historical
// and broken on purpose: they are here to be raced and watched failing.
// Register adds a strategy of your own, which then runs in the same harness,
// matrix and conformance suite as the built-in ones.
//
// # Stores
//
// The Redis strategies are built in: importing this package registers
// them, and they take a connection source in Config.Pool (Config.Nodes for
// redlock). The strategies of the other stores live in packages of their
// own, each of which brings its store's client, so that a program that
// locks on Redis links no other client: importing the package registers
// its strategies, which take the store's client in Config.Store.
//
//	import _ "github.com/locklab/locklab/strategies/etcdlock" // etcd-lease, etcd-mutex; Config.Store: a *clientv3.Client
//	import _ "github.com/locklab/locklab/strategies/pglock"   // pg-advisory, pg-for-update, pg-lock-table; Config.Store: a *pgxpool.Pool
//	import _ "github.com/locklab/locklab/strategies/zklock"   // zk-recipe, zk-ephemeral, zk-golib; Config.Store: a *zk.Conn
//
// The registry knows the names of those strategies without importing
// them (Package): New refuses such a name, when its package is not
// imported, with an error that names the import. It knows too the
// package that registers each family's store with the harness
// (StorePackage), which the harness names to a program that runs a
// strategy without its store; the family of a store outside locklab
// names it in its Descriptions (Description.StorePackage).
//
// # Closing
//
// Every strategy is closed the same way, with locklab.Close(l): it ends
// what the Locker opened for itself, and never closes the client given in
// Config (the Redis pool, the etcd client, the pgx pool, the ZooKeeper
// connection), which stays the caller's to close once every Locker built
// on it is closed. Close releases no lock: one still held ends as it would
// if the holder's process died.
// The strategies that open anything, and what Close ends, are:
//
//   - set-nx-px: the watchdogs of Config.Watchdog.
//   - hash-reentrant: its watchdogs, which run unless Config.NoWatchdog.
//   - etcd-lease: the lease keepalives of Config.Watchdog.
//   - etcd-mutex: the keepalive of its sessions, one per TTL.
//   - pg-advisory, pg-for-update: the pool connection, and so the session, of every lock still held.
//
// Every other strategy holds nothing between calls: Close returns nil and
// does nothing. (A zk-golib Acquire that gives up leaves go-zookeeper's
// blocking Lock running in a goroutine until its turn comes, which no
// Close can stop: see the zklock package.)
package strategies

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/lockkit"
)

// Properties are what a strategy guarantees on one healthy server of its
// store (a healthy cluster, for etcd), with no faults and no pauses. The conformance suite checks each of them, and checks
// that a strategy lacking one really lacks it.
type Properties struct {
	// AtomicAcquire: concurrent acquires of a free key grant it to exactly
	// one client.
	AtomicAcquire bool `json:"atomic_acquire"`
	// ServerTTL: the store itself expires the lock (a Redis key's TTL, an
	// etcd lease), so a crashed holder's lock goes away on its own. Without
	// it, expiry is a timestamp that clients must interpret, or there is
	// none: a PostgreSQL session lock lasts as long as its session.
	ServerTTL bool `json:"server_ttl"`
	// OwnerCheckedRelease: releasing a lease that is no longer held returns
	// locklab.ErrNotHeld and leaves the current holder's lock in place.
	OwnerCheckedRelease bool `json:"owner_checked_release"`
	// Fencing: leases carry a fence number that grows with each acquire.
	Fencing bool `json:"fencing"`
	// Extend: the Locker implements locklab.Extender.
	Extend bool `json:"extend"`
	// MultiNode: the strategy uses Config.Nodes, several independent Redis
	// masters, not Config.Pool.
	MultiNode bool `json:"multi_node"`
}

// Description tells what a strategy is.
type Description struct {
	Name    string `json:"name"`
	Family  string `json:"family"`
	Summary string `json:"summary"`
	// Source names the article or documentation page the algorithm comes
	// from.
	Source string `json:"source"`
	// Weaknesses are the failures it is known for, each one sentence.
	Weaknesses []string   `json:"weaknesses"`
	Properties Properties `json:"properties"`
	// Options names the Config fields meant for some strategies only
	// (OptDriftFactor, OptNodeTimeout, OptNotify, OptWatchdog, OptNoWatchdog,
	// OptStore) that this one reads. New refuses a Config that sets one the
	// strategy does not read.
	Options []string `json:"options,omitempty"`
	// Replica: the strategy waits for a replica of its server to
	// acknowledge the lock (WAIT); on a server without one every acquire
	// fails.
	Replica bool `json:"replica,omitempty"`
	// NoExpiry: the lock has no expiry at all, neither a TTL on the key nor
	// a stamp that others ever find stale: a holder that never releases
	// (it crashed) holds it for ever. Acquire's ttl then bounds only
	// Lease.Until. The conformance suite checks that the lock really
	// outlives its TTL.
	NoExpiry bool `json:"no_expiry,omitempty"`
	// NoCluster, when not empty, says why the strategy cannot run on a
	// Redis Cluster; New refuses a Config with a connection source that
	// reaches one (ClusterSource) with this reason. Empty: every command
	// and script of the strategy touches keys of one hash slot, so a
	// cluster client runs it. Register gives a multi-node strategy
	// noClusterMultiNode when it says nothing.
	NoCluster string `json:"no_cluster,omitempty"`
	// BrokenByDesign, when not empty, says in one sentence how the
	// algorithm loses mutual exclusion or liveness on one healthy server,
	// with no fault but a client's own race, crash or delay, where
	// set-nx-px holds (that a lock has no fence number is Properties.Fencing's
	// to say, not this). Such a strategy is here to be raced and watched
	// failing, never to protect anything; New builds it all the same, and
	// `locklab list` marks it. The recorded matrix (docs/matrix.md) is
	// checked to agree.
	BrokenByDesign string `json:"broken_by_design,omitempty"`
	// StorePackage is the import path of the package that registers the
	// store the strategy locks on with the harness (harness.RegisterStore),
	// for a store outside locklab's own: the harness names it when a
	// program that imports the strategy's package runs it without the
	// store's (StorePackage). locklab's own families leave it empty:
	// the registry knows their stores' packages (familyStores).
	StorePackage string `json:"-"`
}

// noClusterMultiNode is why a multi-node strategy does not run on a Redis
// Cluster.
const noClusterMultiNode = "it needs independent masters (Config.Nodes) that never fail over; " +
	"a Redis Cluster is one keyspace, each key on one master that fails over to an asynchronous replica"

// ClusterSource is a connection source that tells whether it reaches a
// Redis Cluster: the adapters of go-redis's ClusterClient and rueidis's
// cluster client say true.
type ClusterSource interface {
	locklab.ConnSource
	RedisCluster() bool
}

// onCluster reports whether a connection source of cfg reaches a Redis
// Cluster.
func onCluster(cfg locklab.Config) bool {
	for _, src := range append([]locklab.ConnSource{cfg.Pool}, cfg.Nodes...) {
		if cs, ok := src.(ClusterSource); ok && cs.RedisCluster() {
			return true
		}
	}
	return false
}

// The Config fields that only some strategies read (locklab.Config.Options).
const (
	OptDriftFactor = locklab.OptDriftFactor
	OptNodeTimeout = locklab.OptNodeTimeout
	OptNotify      = locklab.OptNotify
	OptWatchdog    = locklab.OptWatchdog
	OptNoWatchdog  = locklab.OptNoWatchdog
	OptStore       = locklab.OptStore
)

// whoReads says which strategies read option opt, for New's refusal: the
// registered ones, and for Store, which only the other stores' strategies
// read, those whose package is not imported, with the import. It is ""
// when it knows none.
func whoReads(opt string) string {
	mu.RLock()
	defer mu.RUnlock()
	var parts []string
	if rs := readers(opt); len(rs) > 0 {
		parts = append(parts, strings.Join(rs, ", "))
	}
	if opt == OptStore {
		if more := unimported(); more != "" {
			parts = append(parts, more)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (strategies that do: " + strings.Join(parts, "; ") + ")"
}

// readers lists the registered strategies that read option opt. The caller
// holds mu.
func readers(opt string) []string {
	var out []string
	for n, e := range registry {
		if slices.Contains(e.desc.Options, opt) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Factory builds a Locker from a Config. It validates the Config and fails
// with an error wrapping locklab.ErrInvalid on bad input.
type Factory func(cfg locklab.Config) (locklab.Locker, error)

type entry struct {
	desc    Description
	factory Factory
}

var (
	mu       sync.RWMutex
	registry = map[string]entry{}
	nameRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)
)

// Register adds a strategy under d.Name. Names are lower case letters,
// digits, dots and dashes; registering a name twice is an error.
func Register(d Description, f Factory) error {
	if !nameRE.MatchString(d.Name) {
		return lockkit.Invalid("strategy name %q: use lower case letters, digits, '.' and '-'", d.Name)
	}
	if f == nil {
		return lockkit.Invalid("strategy %q: nil factory", d.Name)
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[d.Name]; dup {
		return fmt.Errorf("strategy %q is already registered", d.Name)
	}
	d.Weaknesses = slices.Clone(d.Weaknesses)
	if d.Properties.MultiNode && d.NoCluster == "" {
		d.NoCluster = noClusterMultiNode
	}
	registry[d.Name] = entry{desc: d, factory: f}
	return nil
}

// MustRegister is Register that panics on error, for use in init functions.
func MustRegister(d Description, f Factory) {
	if err := Register(d, f); err != nil {
		panic(err)
	}
}

// ErrUnknown is matched by the error New, Lookup and Info return for a name
// that is not registered; so is locklab.ErrInvalid, since the name is bad
// input.
var ErrUnknown = errors.New("unknown strategy")

// unknownError is an unregistered name: errors.Is matches ErrUnknown and
// locklab.ErrInvalid. pkg is the package that registers it, when the name
// is one of another store's strategies (Package).
type unknownError struct{ name, pkg string }

func (e unknownError) Error() string {
	if e.pkg != "" {
		return fmt.Sprintf("strategy %q is in package %s: import it (%s)", e.name, e.pkg, importHint(e.pkg))
	}
	msg := fmt.Sprintf("%v %q: valid names are %s", ErrUnknown, e.name, strings.Join(Names(), ", "))
	mu.RLock()
	more := unimported()
	mu.RUnlock()
	if more != "" {
		msg += "; with their package imported: " + more
	}
	return msg
}

func (e unknownError) Is(target error) bool {
	return target == ErrUnknown || target == locklab.ErrInvalid
}

func unknown(name string) error {
	pkg, _ := Package(name)
	return unknownError{name: name, pkg: pkg}
}

// New builds the strategy registered as name. A Config that sets a field
// the strategy does not read (DriftFactor, NodeTimeout, Notify, Watchdog,
// NoWatchdog, Store) is refused with locklab.ErrInvalid naming the
// strategies that read it, and so is a Config on a Redis Cluster (ClusterSource) for a strategy that
// cannot run on one (Description.NoCluster), with the reason. A name that
// is not registered is refused with ErrUnknown; when it is the strategy of
// another store whose package the program does not import (Package), the
// error names the package to import.
func New(name string, cfg locklab.Config) (locklab.Locker, error) {
	_, f, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	return f(cfg)
}

// Lookup resolves name once: the strategy's description, and a factory
// that builds it as New would (the same refusal of Config fields it does
// not read, the same errors) without looking the name up again. Code that
// builds many Lockers of one strategy, as the harness does for each client
// of each run, resolves the name with Lookup and keeps the factory.
func Lookup(name string) (Description, Factory, error) {
	d, err := Info(name)
	if err != nil {
		return Description{}, nil, err
	}
	mu.RLock()
	build := registry[name].factory
	mu.RUnlock()
	f := func(cfg locklab.Config) (locklab.Locker, error) {
		for _, opt := range cfg.Options() {
			if !slices.Contains(d.Options, opt) {
				return nil, lockkit.Invalid("strategy %s does not read Config.%s%s", name, opt, whoReads(opt))
			}
		}
		if d.NoCluster != "" && onCluster(cfg) {
			return nil, lockkit.Invalid("strategy %s cannot run on a Redis Cluster: %s", name, d.NoCluster)
		}
		l, err := build(cfg)
		if err != nil {
			return nil, fmt.Errorf("strategy %s: %w", name, err)
		}
		return l, nil
	}
	return d, f, nil
}

// Names returns the registered names, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Info describes the strategy registered as name.
func Info(name string) (Description, error) {
	mu.RLock()
	e, ok := registry[name]
	mu.RUnlock()
	if !ok {
		return Description{}, unknown(name)
	}
	d := e.desc
	d.Weaknesses = slices.Clone(d.Weaknesses)
	d.Options = slices.Clone(d.Options)
	return d, nil
}

// All returns the description of every registered strategy, sorted by name.
func All() []Description {
	names := Names()
	out := make([]Description, 0, len(names))
	for _, n := range names {
		d, _ := Info(n)
		out = append(out, d)
	}
	return out
}
