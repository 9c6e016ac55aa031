// locklab matrix: every strategy against every scenario; the matrix flags
// and run that locklab report shares.

package cli

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/stores/redis/redisnode"
)

func newMatrixCmd(g *globals) *cobra.Command {
	var (
		o      harness.MatrixOptions
		asJSON bool
		fail   bool
		nodes  int
	)
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Run every strategy against every scenario and print the verdicts",
		Long: `matrix explores every scenario on every strategy it applies to, within the
bounds, and prints SAFE (within the bound explored), VIOLATED (with the
shortest counterexample), DEADLOCK, STARVATION, or n/a.

Without --strategy it runs the Redis strategies, and those of PostgreSQL,
etcd and ZooKeeper too where their servers are installed (make servers
installs them): it starts a throwaway PostgreSQL server, one etcd member
and one ZooKeeper server on the Redis nodes' backend (containers of
images built from those binaries on docker, local processes on process)
while the Redis nodes start. Their cells run beside the Redis cells, one
store after another (the next store begins once every cell of the one
before has begun), three at a time, bounded by --store-preemptions and
--store-max-schedules (every statement or request is a round trip to a
database or a quorum). A cell that faults no server sees one etcd member
or ZooKeeper server answer as a three-member cluster would, for a third
of the work (docs/reduction.md, "One server for the cells that fault
none"). The cells that kill, restart or fail over a server run on
servers of their own, three-member clusters and ensembles (on the
process backend a ZooKeeper ensemble's three servers are peers of one
JVM, which stays up while they are killed and restarted:
docs/reduction.md, "Fault servers that stay up"), started when a cell
first needs one and stopped once the store's last such cell is done: up
to --fault-servers of each store at once, each worker on one of them. A
store's such cells run one after another from the start, so that a
cell's workers spread over all of its servers.

All the cells share one pool of runs (--pool): a cell starts with one
worker and takes more, up to --workers, each on a database of its own (on
another store, a key of its own), while the pool has room. A cell that
faults a server takes its workers outside the pool, one on each of the
store's fault servers free. A cell runs the same schedules to the same
verdict whatever the parallelism. The addrs
backend (--addr) gives Redis only.

Once the cells are done, it asks the servers it started (not the ones
started for the cells that kill, restart or fail over a server) how many
clients they saw, as explore does (docs/audit.md): a lock that talked to
them through a client of its own fails the matrix with status 2, naming
the server and what it counted (--json: "audit"). On the servers --addr
names it counts nothing.

While it runs, a terminal shows one status line on stderr: the cells done
of the total, schedules a second, the cells running and the time left at
the pace so far (cells differ in cost: a guess). Elsewhere (a pipe, a CI
log) each cell that ran is a line of its own on stderr, with its verdict,
schedules and time. Neither touches stdout, where --json goes.

--shard i/n runs the i-th of n deterministic shares of the cells, so that
n machines (a CI job matrix, a Kubernetes Indexed Job) run the matrix
between them; "locklab matrix merge" puts their --json outputs together
into the matrix one whole run gives (docs/matrix.md, "Running it in
shards").`,
		Example: `  locklab matrix
  locklab matrix --strategy set-nx-px,setnx-del --json
  locklab matrix --shard 2/3 --json > shard-2.json`,
		Args: usageArgs(0, 0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkMatrix(cmd, &o); err != nil {
				return err
			}
			mr, err := g.runMatrix(cmd, &o, nodes)
			if err != nil {
				return err
			}
			defer closeAndTell(cmd.ErrOrStderr(), mr)
			err = printMatrix(cmd, mr.result, &mr.audit, asJSON, fail)
			// A client the harness did not open is the error: no verdict
			// covers its requests.
			return cmp.Or(mr.audit.err(o.Strategies), err)
		},
	}
	f := cmd.Flags()
	matrixFlags(f, &o, &nodes)
	f.Var(&shardValue{p: &o.Shard}, "shard", "run the i-th of n shares of the cells, written i/n (matrix merge puts the shares' --json together)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.BoolVar(&fail, "fail-on-violation", false, "exit with status 1 when any cell is not SAFE or n/a")
	cmd.AddCommand(newMatrixMergeCmd())
	return serverCmd(cmd)
}

// shardValue is the --shard flag: i/n, 1 <= i <= n.
type shardValue struct{ p **harness.Shard }

func (v *shardValue) Set(s string) error {
	sh, err := harness.ParseShard(strings.TrimSpace(s))
	if err != nil {
		return errors.New("must be i/n with 1 <= i <= n, such as 2/3")
	}
	*v.p = sh
	return nil
}

func (v *shardValue) String() string {
	if *v.p == nil {
		return ""
	}
	return (*v.p).String()
}

func (v *shardValue) Type() string { return "i/n" }

// newMatrixMergeCmd is locklab matrix merge: the shards' --json outputs
// put together.
func newMatrixMergeCmd() *cobra.Command {
	var asJSON, fail bool
	cmd := &cobra.Command{
		Use:   "merge SHARD.json...",
		Short: "Put the --json outputs of every shard of a matrix together",
		Long: `merge reads the --json outputs of "locklab matrix --shard i/n", one for
each i from 1 to n in any order, and prints the matrix one whole run with
the same options gives: the same cells, verdicts, counterexamples and
schedule counts, in the same order, as text or, with --json, the JSON of
"locklab matrix --json" (its elapsed_ns is the longest shard's; its audit
says what every shard's servers counted, and fails the merge as it failed
the shard). It
refuses a shard given twice or missing, shards of different splits, and
shards that ran other strategies or scenarios (run every shard with the
same --strategy and --scenario, on machines with the same stores
installed). The exit status is that of "locklab matrix" on the merged
matrix.`,
		Example: `  locklab matrix merge shard-1.json shard-2.json shard-3.json --json > matrix.json`,
		Args:    usageArgs(1, math.MaxInt, "matrix merge needs the --json output of every shard, such as shard-1.json shard-2.json"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var (
				parts  []*harness.MatrixResult
				audits []*auditResult
			)
			for _, name := range args {
				b, err := os.ReadFile(name)
				if err != nil {
					return err
				}
				var m struct {
					harness.MatrixResult
					Audit *auditResult `json:"audit"`
				}
				if err := json.Unmarshal(b, &m); err != nil {
					return fmt.Errorf("%s: not the --json of locklab matrix: %w", name, err)
				}
				parts, audits = append(parts, &m.MatrixResult), append(audits, m.Audit)
			}
			m, err := harness.MergeShards(parts)
			if err != nil {
				return err
			}
			ar := mergeAudits(audits)
			err = printMatrix(cmd, m, ar, asJSON, fail)
			if ar != nil {
				err = cmp.Or(ar.err(m.Strategies), err)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON, as matrix --json does")
	cmd.Flags().BoolVar(&fail, "fail-on-violation", false, "exit with status 1 when any cell is not SAFE or n/a")
	return cmd
}

// matrixFlags are the flags that bound a verdict matrix (matrix, report).
func matrixFlags(f *pflag.FlagSet, o *harness.MatrixOptions, nodes *int) {
	f.StringSliceVarP(&o.Strategies, "strategy", "s", nil, "restrict to these strategies")
	f.StringSliceVarP(&o.Scenarios, "scenario", "x", nil, "restrict to these scenarios")
	intFlag(f, &o.MaxPreemptions, "preemptions", "", 2, atLeast(0).orZero("none"), "most preemptions per schedule")
	intFlag(f, &o.MaxSchedules, "max-schedules", "", harness.MatrixSchedules, atLeast(1), "most schedules per cell (a cell that reaches it is marked safe*)")
	intFlag(f, &o.Workers, "workers", "", harness.MatrixWorkers, intRange{min: 1, max: harness.MaxWorkers},
		"most schedules of one cell run at once, each on its own database (on another store, a key of its own) (1 to 16)")
	intFlag(f, &o.Parallel, "parallel", "", harness.MatrixParallel, atLeast(1), "cells explored at once")
	intFlag(f, &o.Pool, "pool", "", 0, atLeast(0).orZero(fmt.Sprintf("eight per core, %d here", harness.DefaultPool())),
		"most schedules run at once across the cells: each cell starts with one and takes more, up to --workers, while the pool has room (a cell that faults a server: one on each fault server, outside the pool)")
	f.BoolVar(&o.Naive, "naive", false, "count the plain enumeration's schedules in every cell, running it where the reduction skipped some")
	f.BoolVar(&o.NoSymmetry, "no-symmetry", false, "explore clients that run the same program as if they differed: no schedule is left to its mirror image (docs/reduction.md)")
	intFlag(f, nodes, "nodes", "", 3, atLeast(1), "Redis nodes to start (multi-node scenarios need 3)")
	intFlag(f, &o.StorePreemptions, "store-preemptions", "", harness.StorePreemptions, atLeast(0).orZero("none"),
		"most preemptions per schedule in the PostgreSQL, etcd and ZooKeeper cells")
	intFlag(f, &o.StoreSchedules, "store-max-schedules", "", harness.StoreSchedules, atLeast(1),
		"most schedules per PostgreSQL, etcd or ZooKeeper cell (a cell that reaches it is marked safe*)")
	intFlag(f, &o.FaultServers, "fault-servers", "", 0, atLeast(1).orZero(faultServersDefaults()),
		"most servers (a cluster each) of each store, beyond the first, for the cells that kill, restart or fail over a server; started as those cells need them")
}

// faultServersDefaults says how many fault servers each store takes
// by default: "3 of each store, 6 of etcd".
func faultServersDefaults() string {
	out := fmt.Sprintf("%d of each store", harness.DefaultFaultServers)
	for _, d := range harness.Stores() {
		if n := harness.FaultServersOf(d.Name); n != harness.DefaultFaultServers {
			out += fmt.Sprintf(", %d of %s", n, d.Title)
		}
	}
	return out
}

// checkMatrix checks the names a matrix is restricted to, and turns a
// --preemptions 0 into the library's none.
func (g *globals) checkMatrix(cmd *cobra.Command, o *harness.MatrixOptions) error {
	if err := g.strategies(cmd, "strategy", o.Strategies); err != nil {
		return err
	}
	if err := g.scenarios(cmd, "scenario", o.Scenarios); err != nil {
		return err
	}
	if o.MaxPreemptions == 0 {
		o.MaxPreemptions = -1
	}
	if o.StorePreemptions == 0 {
		o.StorePreemptions = -1
	}
	return nil
}

// printMatrix writes m as text or JSON, with the servers' audit where
// the matrix ran here (ar), and returns the exit status's error:
// errViolation where fail is set and a cell failed, noCellRan's where
// every cell is n/a.
func printMatrix(cmd *cobra.Command, m *harness.MatrixResult, ar *auditResult, asJSON, fail bool) error {
	w := cmd.OutOrStdout()
	var err error
	if asJSON {
		err = render.JSON(w, struct {
			*harness.MatrixResult
			Audit *auditResult `json:"audit,omitempty"`
		}{m, ar})
	} else {
		err = render.MatrixText(w, m)
	}
	if err != nil {
		return err
	}
	if fail && m.Violations() > 0 {
		return errViolation
	}
	return noCellRan(m)
}

// noCellRan is the error of a matrix whose every cell is n/a: it ran no
// schedule, and its SAFE count of zero says nothing.
func noCellRan(m *harness.MatrixResult) error {
	reasons := map[string]int{}
	var order []string
	for _, c := range m.Cells {
		if c.Outcome != harness.NA {
			return nil
		}
		if reasons[c.Message] == 0 {
			order = append(order, c.Message)
		}
		reasons[c.Message]++
	}
	var why []string
	for _, r := range order {
		why = append(why, fmt.Sprintf("%s (%d %s)", r, reasons[r], plural(reasons[r], "cell", "cells")))
	}
	if len(why) == 0 {
		return errors.New("the matrix has no cell: no schedule ran")
	}
	return fmt.Errorf("no cell of the matrix ran a schedule, every one is n/a: %s", strings.Join(why, "; "))
}

// matrixRun is a finished matrix and the nodes it ran on (still running:
// the caller closes the cluster).
type matrixRun struct {
	result  *harness.MatrixResult
	cluster *redisnode.Cluster
	stores  *stores.Servers
	// audit is what the servers' audit found once the cells were done.
	audit auditResult
	// said describes the other stores' servers, a line each.
	said  []string
	began time.Time
}

// Close stops the nodes.
func (mr *matrixRun) Close() error { return errors.Join(mr.stores.Close(), mr.cluster.Close()) }

// runMatrix starts the nodes (with a replica where a failover scenario
// needs one) and the other stores' servers, at once, and runs the matrix,
// with a progress line on stderr.
func (g *globals) runMatrix(cmd *cobra.Command, o *harness.MatrixOptions, nodes int) (*matrixRun, error) {
	ctx := cmd.Context()
	errw := cmd.ErrOrStderr()
	names := o.Strategies
	if len(names) == 0 && !g.addrsBackend() {
		// The whole matrix: the stores installed here too.
		names = stores.Names()
	}
	if err := g.storesGiven(names); err != nil {
		return nil, err
	}
	backend, err := g.storesBackend(ctx, names)
	if err != nil {
		return nil, err
	}
	// The stores start while the Redis nodes do; the lines that say what
	// started are written once both are up, Redis's first.
	var (
		others *stores.Servers
		serr   error
		said   []string
	)
	started := make(chan struct{})
	go func() {
		defer close(started)
		others, serr = stores.StartShared(ctx, backend, names, func(line string) { said = append(said, line) })
	}()
	c, ns, err := g.cluster(ctx, errw, nodes)
	if err == nil {
		scs := o.Scenarios
		if len(scs) == 0 {
			scs = scenarioNames()
		}
		o.Nodes = withReplica(ctx, c, ns, namesNeedReplica(scs, o.Strategies))
	}
	<-started
	if err != nil || serr != nil {
		closeAndTell(errw, others)
		if c != nil {
			closeAndTell(errw, c)
		}
		return nil, errors.Join(err, serr)
	}
	for _, line := range said {
		fmt.Fprintln(errw, line)
	}
	o.Stores = others.Nodes
	o.StartFaultServer = stores.FaultServer(backend)
	aud, err := g.startAudit(ctx, auditNodes(o.Nodes, others.Nodes))
	if err != nil {
		closeAndTell(errw, others)
		closeAndTell(errw, c)
		return nil, err
	}
	began := time.Now()
	st := newStatus(errw)
	newMatrixProgress(st, began).hook(o)
	m, err := harness.Matrix(ctx, *o)
	st.clear()
	// Read even when the run failed, as explore does.
	ar := aud.check(ctx, errw)
	if err != nil {
		closeAndTell(errw, others)
		closeAndTell(errw, c)
		return nil, ar.withRun(o.Strategies, err)
	}
	return &matrixRun{result: m, cluster: c, stores: others, audit: ar, said: said, began: began}, nil
}
