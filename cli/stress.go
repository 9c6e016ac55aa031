// locklab stress: many clients on real time, with pauses, crashes and
// node faults.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/render"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/stores/redis"
	"github.com/locklab/locklab/stores/redis/redisnode"
	"github.com/locklab/locklab/strategies"
)

// stressArgs are stress's flags: the run's options and how its report
// is given.
type stressArgs struct {
	o       stress.Options
	refresh time.Duration // the Sentinel group's (redis.StressServers.SentinelRefresh)
	asJSON  bool
	fail    bool
	nodes   int
	faults  []string
	html    string
}

func newStressCmd(g *globals) *cobra.Command {
	var a stressArgs
	cmd := &cobra.Command{
		Use:   "stress --strategy S",
		Short: "Run many clients on real time with pauses and crashes, and count the damage",
		Long: `stress runs --clients clients that loop acquire, a read-modify-write of a
shared register, release, on real Redis with millisecond TTLs, while
holders pause past their TTL (--pause-prob) and clients crash between two
commands (--crash-prob). It reports overlapping holds, lost updates,
accesses the register's fence check refused, and liveness failures.
Every critical section is also one operation of a history that porcupine
checks for linearizability against the register's model (fenced unless
--no-fence), within --porcupine-timeout ("unknown" past it);
--porcupine-html writes porcupine's visualization of the history.

With --processes each client is its own process: a pause is SIGSTOP, a
crash SIGKILL. --node-faults injects node faults every --fault-every
(pause, restart without data, restart-keep with an append-only file,
partition); it needs the docker or process backend.

--node-faults failover runs the lock on a Redis Sentinel group instead of
plain nodes: a master, two asynchronous replicas and three Sentinels
(down-after 1s), which the clients reach through a Sentinel-aware pool.
Every --fault-every the master is cut off from its replicas and the
Sentinels (its default user is turned off; the clients log in as a user of
their own and still reach it) for at least --fault-for and until the
Sentinels have promoted a replica; then it is reconnected and answers as a
master, to the clients that still reach it, until the Sentinels demote it
(about 10s later). Each client asks the Sentinels which server is the
master every --sentinel-refresh, the clients' questions spread over one
period: the clients that have not yet asked since the promotion are the
old master's. Each failover takes over 10s:
give --duration room for a few. It takes a single-node strategy, alone
among the node faults, and the docker or process backend. The whole group
is removed when the run ends, Ctrl-C included.

--node-faults cluster-failover runs the lock on a Redis Cluster instead: 3
masters and 3 replicas (cluster-node-timeout 1s), which each client reaches
through a cluster client of its own (locklab.ClusterPool). Every
--fault-every the master of the lock key's slot has its replication link
cut for --fault-for while the clients keep locking on it, is killed
(SIGKILL), the cluster elects its replica (a few seconds), and the old
master is started again and rejoins as a replica. The elected replica has
none of the writes since the cut: its fence counter is behind. It takes a
strategy that can run on a Redis Cluster, alone among the node faults, and
the docker or process backend; the cluster is removed when the run ends,
Ctrl-C included.

An etcd strategy (etcd-lease) runs on a three-member etcd cluster started
on the backend (a container per member on docker, local processes on
process; never on addrs), which the clients reach through a loopback proxy
per member; --ttl defaults to 1s,
etcd's lease granularity. Its node faults strike the member that leads
when each begins: leader-kill (SIGKILL, then started again on its data
directory), pause (SIGSTOP, then SIGCONT) and partition (the clients'
proxy to the leader cut; its peers still reach it).

A ZooKeeper strategy (zk-recipe, zk-ephemeral, zk-golib) runs on a
three-server ensemble of local processes, reached through a loopback proxy
per server, each client on a session of its own whose timeout is --ttl (a
multiple of 400ms, 400ms by default: two ticks of the servers'). Its node
faults are etcd's: leader-kill, pause and partition, on the server that
leads. A client's pause stops its heartbeats only with --processes.

A PostgreSQL strategy (pg-lock-table, pg-for-update, pg-advisory) runs on
a throwaway PostgreSQL server started on the backend (a local process on
process, a container on docker; never on addrs), each client with a
connection pool of its own; a crash closes its connections, and the
server ends its sessions and their session locks with them. Its node
faults strike the server: pause (SIGSTOP to the postmaster and every
backend, then SIGCONT), restart-keep (SIGKILL, then started again on its
data directory: every session ends, committed rows stay) and partition
(the clients' connections cut at a loopback proxy: the server ends their
sessions, the clients hear nothing until it heals). With --processes
each client is a process with a pool of its own: a crash (SIGKILL) ends
its sessions with it.`,
		Example: `  locklab stress --strategy setnx-del
  locklab stress --strategy set-nx-px --pause-prob 0 --crash-prob 0 --cycles 100000
  locklab stress --strategy set-nx-px --no-fence --duration 10s --json
  locklab stress --strategy set-nx-px-del --no-fence --duration 5s --porcupine-html history.html
  locklab stress --strategy set-nx-px-del --processes --first
  locklab stress --strategy set-nx-px --node-faults restart,partition --fault-every 2s
  locklab stress --strategy set-nx-px --node-faults failover --duration 30s
  locklab stress --strategy set-nx-px-wait --node-faults failover --processes --duration 30s
  locklab stress --strategy set-nx-px --node-faults cluster-failover --fault-for 1s --duration 20s
  locklab stress --strategy etcd-lease --node-faults leader-kill,pause,partition --pause-prob 0 --duration 30s
  locklab stress --strategy pg-lock-table --duration 10s`,
		Args: usageArgs(0, 0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.stress(cmd, &a)
		},
	}
	stressFlags(cmd.Flags(), &a)
	return serverCmd(cmd)
}

// stressFlags registers stress's flags on f, bound to a.
func stressFlags(f *pflag.FlagSet, a *stressArgs) {
	o := &a.o
	f.StringVarP(&o.Strategy, "strategy", "s", "", "strategy to stress (required)")
	intFlag(f, &o.Clients, "clients", "", 8, atLeast(1), "concurrent clients")
	durFlag(f, &o.Duration, "duration", 30*time.Second, durRange{positive: true}, "how long the clients run; then each finishes the cycle it is in, a paused holder woken at once")
	intFlag(f, &o.Cycles, "cycles", "", 0, atLeast(0).orZero("no limit, run for --duration"), "stop after this many critical sections")
	durFlag(f, &o.TTL, "ttl", 100*time.Millisecond, durRange{min: time.Millisecond}, "lease TTL, at least 1ms (1s and at least 1s with an etcd strategy; 400ms and a multiple of it with a ZooKeeper strategy)")
	probFlag(f, &o.PauseProb, "pause-prob", 0.02, "never", "chance a holder pauses 3 x TTL inside the critical section, from 0 to 1")
	probFlag(f, &o.CrashProb, "crash-prob", 0.005, "never", "chance a client crashes after each command, from 0 to 1")
	durFlag(f, &o.Skew, "skew", 0, durRange{zero: "no skew"}, "give each client a clock offset within ±skew")
	f.BoolVar(&o.NoFence, "no-fence", false, "the register does not check fence numbers")
	f.BoolVar(&o.StopOnViolation, "first", false, "stop at the first violation")
	f.Uint64Var(&o.Seed, "seed", 1, "seed for pauses, crashes, skews and holds")
	intFlag(f, &a.nodes, "nodes", "", 5, atLeast(1), "Redis nodes for a multi-node strategy")
	f.BoolVar(&a.asJSON, "json", false, "print the report as JSON")
	durFlag(f, &o.CheckTimeout, "porcupine-timeout", 10*time.Second, durRange{zero: "no check"}, "bound of the linearizability check of the history (past it: unknown)")
	f.StringVar(&a.html, "porcupine-html", "", "write porcupine's HTML visualization of the history to this file")
	f.BoolVar(&a.fail, "fail-on-violation", false, "exit with status 1 when a violation is found (a history that is not linearizable included)")
	f.BoolVar(&o.Processes, "processes", false, "run each client as its own process: pauses are SIGSTOP, crashes SIGKILL")
	f.StringSliceVar(&a.faults, "node-faults", nil, "node faults to inject: "+fault.Join(redis.StressNodeFaults)+
		", or failover (on a Sentinel group), or cluster-failover (on a Redis Cluster); with an etcd or ZooKeeper strategy leader-kill, pause or partition; with a PostgreSQL strategy pause, restart-keep, partition, kill (every client session killed) or failover (to a standby) (default: none)")
	durFlag(f, &o.FaultEvery, "fault-every", 2*time.Second, durRange{positive: true}, "time between two node faults")
	durFlag(f, &a.refresh, "sentinel-refresh", locklab.DefaultSentinelRefresh, durRange{positive: true}, "with --node-faults failover: how often each client asks the Sentinels which server is the master")
	durFlag(f, &o.FaultFor, "fault-for", 0, durRange{positive: true}, "how long each node fault lasts (default 5 x --ttl)")
}

// stressPlan is where a checked stress run goes: the store the strategy
// locks on when it is not Redis (sd), else whether it runs on a Sentinel
// group (failover) or a Redis Cluster (cfailover) rather than plain nodes.
type stressPlan struct {
	sd                  *stress.StoreDriver
	failover, cfailover bool
}

// stress runs "locklab stress": it checks a's flags, then runs the
// clients on the strategy's store, or on the Redis servers it starts.
func (g *globals) stress(cmd *cobra.Command, a *stressArgs) error {
	p, err := g.checkStress(cmd, a)
	if err != nil {
		return err
	}
	if p.sd != nil {
		return runStressStore(cmd, g, p.sd, a.o, a.asJSON, a.fail, a.html)
	}
	if err := storeFault(a.o.Faults); err != nil {
		return err
	}
	return g.stressRedis(cmd, a, p)
}

// errNoFaults refuses node faults on servers the run does not control.
var errNoFaults = fmt.Errorf("--node-faults needs a backend that controls its servers (docker or process), not %s", backends.Addrs)

// checkStress checks stress's flags against each other and the strategy,
// sets the options they imply in a (the Redis nodes, the faults, the
// probabilities turned off) and tells where the run goes.
func (g *globals) checkStress(cmd *cobra.Command, a *stressArgs) (stressPlan, error) {
	o := &a.o
	var p stressPlan
	if o.Strategy == "" {
		return p, errors.New("stress needs --strategy (see locklab list)")
	}
	if err := g.strategies(cmd, "strategy", []string{o.Strategy}); err != nil {
		return p, err
	}
	d, err := strategies.Info(o.Strategy)
	if err != nil {
		return p, err
	}
	if cmd.Flags().Changed("porcupine-html") {
		if err := checkOut(a.html); err != nil {
			return p, g.args.badFlag(cmd, "porcupine-html", a.html, "%v", err)
		}
	}
	// The store the strategy locks on, when it is not Redis.
	p.sd = stress.LookupStore(d.Family)
	if cmd.Flags().Changed("nodes") && (!d.Properties.MultiNode || p.sd != nil) {
		where := "locks on one Redis node"
		if p.sd != nil && p.sd.Servers != "" {
			where = "runs on " + p.sd.Servers
		}
		return p, g.args.badFlag(cmd, "nodes", strconv.Itoa(a.nodes), "%s %s; --nodes is the Redis nodes of a multi-node strategy (%s)",
			o.Strategy, where, strings.Join(multiNodeStrategies(), ", "))
	}
	if !d.Properties.MultiNode {
		a.nodes = 1
	}
	// 0 turns a fault off on the command line; the library's off
	// is negative.
	o.PauseProb, o.CrashProb = off(o.PauseProb), off(o.CrashProb)
	for _, f := range a.faults {
		if k, perr := fault.Parse(f); perr == nil && k == fault.MemberLoss {
			return p, g.args.badFlag(cmd, "node-faults", f, "a member's loss is a step of the scenarios' schedules "+
				"(lag(nN), then wipe(nN): locklab explore -x member-loses-data), which stress mode does not inject; %s", unknownFault())
		}
		if _, err := stress.ParseFaults([]string{f}); err != nil {
			return p, g.args.badFlag(cmd, "node-faults", f, "%s", unknownFault())
		}
	}
	if o.Faults, err = stress.ParseFaults(a.faults); err != nil {
		return p, err
	}
	if len(o.Faults) > 0 && g.addrsBackend() {
		return p, errNoFaults
	}
	// A failover of the store's own (a standby promoted) is not a
	// Sentinel group's.
	p.failover = slices.Contains(o.Faults, fault.Failover) && !injects(p.sd, fault.Failover)
	if p.failover {
		if err := checkFailover(o.Faults, d); err != nil {
			return p, err
		}
		a.nodes = 1
	} else if cmd.Flags().Changed("sentinel-refresh") {
		return p, g.args.badFlag(cmd, "sentinel-refresh", a.refresh.String(),
			"the clients ask Sentinels only on a Sentinel group, which --node-faults failover starts on a Redis strategy")
	}
	p.cfailover = slices.Contains(o.Faults, fault.ClusterFailover) && !injects(p.sd, fault.ClusterFailover)
	if p.cfailover {
		if err := checkClusterFailover(o.Faults, d); err != nil {
			return p, err
		}
		a.nodes = 1
	}
	return p, nil
}

// stressRedis starts a.nodes Redis nodes, and on them the Sentinel group
// or Redis Cluster p asks for, and runs the clients on them.
func (g *globals) stressRedis(cmd *cobra.Command, a *stressArgs, p stressPlan) error {
	ctx, o := cmd.Context(), &a.o
	errw := cmd.ErrOrStderr()
	c, _, err := g.cluster(ctx, errw, a.nodes)
	if err != nil {
		return err
	}
	defer closeAndTell(cmd.ErrOrStderr(), c)
	if len(o.Faults) > 0 && c.Backend() == backends.Addrs {
		return errNoFaults
	}
	o.Shared = c.Backend() == backends.Addrs
	servers := &redis.StressServers{}
	if p.failover {
		g, err := startSentinels(ctx, errw, c)
		if err != nil {
			return err
		}
		defer closeAndTell(cmd.ErrOrStderr(), g)
		servers.Sentinels, servers.SentinelRefresh = g, a.refresh
	}
	if p.cfailover {
		g, err := startRedisCluster(ctx, errw, c)
		if err != nil {
			return err
		}
		defer closeAndTell(cmd.ErrOrStderr(), g)
		servers.Cluster = g
	}
	for _, n := range c.Nodes() {
		if p.failover || p.cfailover {
			break
		}
		servers.Nodes = append(servers.Nodes, locklab.ConnSource(n.Pool()))
		servers.Addrs = append(servers.Addrs, n.URL())
		servers.FaultNodes = append(servers.FaultNodes, n)
		if slices.Contains(o.Faults, fault.RestartKeep) {
			// A restart with its data brings the keys back only
			// from an append-only file.
			if err := n.SetAppendOnly(ctx, true, "always"); err != nil {
				return err
			}
		}
	}
	o.Store = servers
	return runStress(cmd, *o, a.asJSON, a.fail, a.html)
}

// runStress runs o and writes its report.
func runStress(cmd *cobra.Command, o stress.Options, asJSON, fail bool, html string) error {
	if o.Processes {
		w, err := workerCommand(cmd)
		if err != nil {
			return err
		}
		o.WorkerCommand = w
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = -1 // --porcupine-timeout 0: no check
	}
	st := newStatus(cmd.ErrOrStderr())
	o.Progress = func(p stress.Progress) {
		if cmd.Context().Err() == nil {
			st.set("%v: %d cycles, %d violations", p.Elapsed.Round(time.Second), p.Cycles, p.Violations)
		}
	}
	// Interrupted, the run waits for its clients to stop and for a node
	// fault in progress to heal: said when it takes a while.
	what := "the clients to stop"
	if len(o.Faults) > 0 {
		what += " and the node fault in progress, if any, to heal"
	}
	returned := st.whileStopping(cmd.Context(), what)
	rep, err := stress.Run(cmd.Context(), o)
	returned()
	st.clear()
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if asJSON {
		err = render.JSON(w, rep)
	} else {
		err = writeStress(w, rep)
	}
	if err != nil {
		return err
	}
	if html != "" && rep.Linearizability != nil {
		if err := writeVisualization(html, rep); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "porcupine visualization: %s\n", html)
	}
	if fail && rep.Violated() {
		return errViolation
	}
	if why := rep.Idle(); why != "" && !rep.Interrupted {
		// Nothing ran: no count above says the lock held.
		return fmt.Errorf("stress on %s: %s", rep.Strategy, why)
	}
	return nil
}

// writeVisualization writes porcupine's HTML view of rep's history to path.
func writeVisualization(path string, rep *stress.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.Visualize(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkFailover refuses what a run on a Sentinel group cannot do: other
// node faults alongside the failover, and strategies that need several
// independent masters.
func checkFailover(faults []fault.Fault, d strategies.Description) error {
	for _, f := range faults {
		if f != fault.Failover {
			return fmt.Errorf("--node-faults failover runs on a Sentinel group and cannot be combined with %s", f)
		}
	}
	if d.Properties.MultiNode {
		return fmt.Errorf("--node-faults failover: %s needs several independent masters, a Sentinel group has one; "+
			"use a single-node strategy (set-nx-px, set-nx-px-wait, ...)", d.Name)
	}
	return nil
}

// checkClusterFailover refuses what a run on a Redis Cluster cannot do:
// other node faults alongside the cluster failover, and strategies that
// cannot run on a cluster.
func checkClusterFailover(faults []fault.Fault, d strategies.Description) error {
	for _, f := range faults {
		if f != fault.ClusterFailover {
			return fmt.Errorf("--node-faults cluster-failover runs on a Redis Cluster and cannot be combined with %s", f)
		}
	}
	if d.NoCluster != "" {
		return fmt.Errorf("--node-faults cluster-failover: %s cannot run on a Redis Cluster: %s", d.Name, d.NoCluster)
	}
	return nil
}

// startRedisCluster starts the Redis Cluster a cluster-failover run locks
// on; c's Close removes it too.
func startRedisCluster(ctx context.Context, w io.Writer, c *redisnode.Cluster) (*redisnode.RedisCluster, error) {
	g, err := c.StartRedisCluster(ctx, redisnode.RedisClusterOptions{})
	if err != nil {
		return nil, err
	}
	var ns []string
	for _, n := range g.Nodes() {
		ns = append(ns, n.Name()+" "+n.Addr())
	}
	fmt.Fprintf(w, "Redis Cluster (cluster-node-timeout %v): %s\n", g.NodeTimeout(), strings.Join(ns, ", "))
	return g, nil
}

// startSentinels starts the Sentinel group a failover run locks on; c's
// Close removes it too.
func startSentinels(ctx context.Context, w io.Writer, c *redisnode.Cluster) (*redisnode.SentinelGroup, error) {
	g, err := c.StartSentinels(ctx, redisnode.SentinelOptions{})
	if err != nil {
		return nil, err
	}
	var data, sents []string
	for _, n := range g.Nodes() {
		data = append(data, n.Name()+" "+n.Addr())
	}
	for _, n := range g.Sentinels() {
		sents = append(sents, n.Name()+" "+n.Addr())
	}
	fmt.Fprintf(w, "Sentinel group %s: master and replicas %s; Sentinels %s\n",
		g.MasterName(), strings.Join(data, ", "), strings.Join(sents, ", "))
	return g, nil
}

// inFaults says how many violations of kind were seen during node faults,
// when the run injected any.
func inFaults(r *stress.Report, kind string) string {
	if len(r.NodeFaults) == 0 || r.Counts[kind] == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d during node faults)", r.InFaults[kind])
}

func writeStress(w io.Writer, r *stress.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "strategy\t%s (%d %s, ttl %v)\n", r.Strategy, r.Clients, plural(r.Clients, "client", "clients"), r.TTL)
	fmt.Fprintf(tw, "cycles\t%d in %v (%.0f/s)\n", r.Cycles, r.Elapsed.Round(time.Millisecond), r.Throughput)
	if r.Interrupted {
		fmt.Fprintln(tw, "interrupted\tby a signal, before its --duration or --cycles: the counts cover the run until then")
	}
	fmt.Fprintf(tw, "acquire wait\tp50 %v, p99 %v\n", r.AcquireP50.Round(time.Microsecond), r.AcquireP99.Round(time.Microsecond))
	fmt.Fprintf(tw, "faults\t%d pauses, %d crashes, %d node faults\n", r.Pauses, r.Crashes, len(r.NodeFaults))
	if r.Errors > 0 {
		fmt.Fprintf(tw, "errors\t%d %s failed, the first: %s\n", r.Errors, plural(int(r.Errors), "acquire", "acquires"), r.FirstError)
	}
	fmt.Fprintf(tw, "overlapping holds\t%d%s\n", r.Overlaps, inFaults(r, stress.KindOverlap))
	fmt.Fprintf(tw, "lost updates\t%d%s\n", r.LostUpdates, inFaults(r, stress.KindLostUpdate))
	fmt.Fprintf(tw, "fence refusals\t%d\n", r.FenceRefusals)
	if r.Liveness != "" {
		fmt.Fprintf(tw, "liveness\t%s\n", r.Liveness)
	}
	if l := r.Linearizability; l != nil {
		pending := ""
		if l.Pending > 0 {
			pending = fmt.Sprintf(", %d pending", l.Pending)
		}
		if l.Operations == 0 && l.Pending == 0 {
			fmt.Fprintln(tw, "linearizability\tnothing to check: no operation")
		} else {
			fmt.Fprintf(tw, "linearizability\t%s (%s model, %d operations%s, checked in %v)\n",
				l.Result, l.Model, l.Operations, pending, l.Took.Round(time.Microsecond))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.NodeFaults) > 0 {
		fmt.Fprintln(w, "\nnode faults:")
		for _, f := range r.NodeFaults {
			fmt.Fprintf(w, "  %10v  %-12s node %s for %v", f.At.Round(time.Millisecond), f.Kind, f.Node, f.For.Round(time.Millisecond))
			if f.Err != "" {
				fmt.Fprintf(w, " (%s)", f.Err)
			}
			fmt.Fprintln(w)
			for _, s := range f.Steps {
				fmt.Fprintf(w, "  %10v    %s\n", s.At.Round(time.Millisecond), s.What)
			}
		}
	}
	if !r.Violated() {
		switch why := r.Idle(); {
		case why != "":
			// Not a pass: nothing was tried.
			fmt.Fprintf(w, "\nnothing to judge: %s\n", why)
		case r.Interrupted:
			fmt.Fprintln(w, "\nno violation before the interrupt")
		default:
			fmt.Fprintln(w, "\nno violation")
		}
		return nil
	}
	firsts := r.First
	for _, v := range r.FirstInFaults {
		if !slices.ContainsFunc(r.First, func(f stress.Violation) bool { return f.Kind == v.Kind && f.At == v.At }) {
			v.Kind = stress.KindLabel(v.Kind) + " during a node fault"
			firsts = append(firsts, v)
		}
	}
	if len(firsts) == 0 {
		fmt.Fprintln(w, "\nviolation: the history is not linearizable, though no overlap or lost update was counted")
	}
	for _, v := range firsts {
		fmt.Fprintf(w, "\nfirst %s at %v: %s\n", stress.KindLabel(v.Kind), v.At.Round(time.Millisecond), v.Detail)
		for _, e := range v.Timeline {
			who := fmt.Sprintf("client %d", e.Client)
			if e.Client == stress.NodeFaultClient {
				who = "nodes"
			}
			fmt.Fprintf(w, "  %10v  %-9s %s\n", e.At.Round(100*time.Microsecond), who, e.What)
		}
	}
	return nil
}
