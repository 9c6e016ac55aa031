// stress on the stores other than Redis: an etcd cluster or a PostgreSQL
// server started for the run.

package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/postgres"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/strategies"
)

// runStressEtcd runs an etcd-family strategy on a three-member etcd
// cluster it starts on the backend (local processes or containers; addrs
// gives Redis servers only), with the node faults of
// stress.EtcdFaultKinds. The TTL defaults to 1s, etcd's lease
// granularity.
func runStressEtcd(cmd *cobra.Command, g *globals, o stress.Options, asJSON, fail bool, html string) error {
	if g.addrsBackend() {
		return fmt.Errorf("strategy %s locks on etcd, which the addrs backend does not give: use --backend process", o.Strategy)
	}
	for _, f := range o.Faults {
		if !slices.Contains(stress.EtcdFaultKinds, f) {
			return fmt.Errorf("--node-faults %s: a run on etcd injects %s", f, node.JoinFaults(stress.EtcdFaultKinds))
		}
	}
	if !cmd.Flags().Changed("ttl") {
		o.TTL = time.Second
	}
	if o.TTL < time.Second || o.TTL%time.Second != 0 {
		return g.args.badFlag(cmd, "ttl", o.TTL.String(), "%s's leases are etcd's, in whole seconds: give 1s, 2s, ...", o.Strategy)
	}
	backend, err := stores.Backend(cmd.Context(), g.backend)
	if err != nil {
		return err
	}
	cl, err := etcdproc.Start(cmd.Context(), etcdproc.Options{Backend: backend})
	if err != nil {
		return fmt.Errorf("starting etcd for %s: %w", o.Strategy, err)
	}
	defer cl.Close()
	fmt.Fprintf(cmd.ErrOrStderr(), "etcd: %s\n", cl.Describe())
	o.Etcd = cl
	return runStress(cmd, o, asJSON, fail, html)
}

// multiNodeStrategies names the strategies that lock on several Redis
// nodes.
func multiNodeStrategies() []string {
	var out []string
	for _, name := range strategies.Names() {
		if d, err := strategies.Info(name); err == nil && d.Properties.MultiNode {
			out = append(out, name)
		}
	}
	return out
}

// runStressPG runs a PostgreSQL strategy on a throwaway PostgreSQL server
// it starts on the backend (a local process on process, a container on
// docker; never on addrs), with the node faults of stress.PGFaultKinds.
func runStressPG(cmd *cobra.Command, g *globals, o stress.Options, asJSON, fail bool, html string) error {
	if g.addrsBackend() {
		return fmt.Errorf("strategy %s locks on PostgreSQL, which the addrs backend does not give: use --backend process", o.Strategy)
	}
	for _, f := range o.Faults {
		if !slices.Contains(stress.PGFaultKinds, f) {
			return g.args.badFlag(cmd, "node-faults", f.String(), "a run on PostgreSQL injects %s", node.JoinFaults(stress.PGFaultKinds))
		}
	}
	if err := stores.Installed(postgres.Name); err != nil {
		return fmt.Errorf("strategy %s locks on PostgreSQL: %w", o.Strategy, err)
	}
	backend, err := stores.Backend(cmd.Context(), g.backend)
	if err != nil {
		return err
	}
	srv, err := pgproc.Start(cmd.Context(), pgproc.Options{Backend: backend})
	if err != nil {
		return fmt.Errorf("starting PostgreSQL for %s: %w", o.Strategy, err)
	}
	defer closeAndTell(cmd.ErrOrStderr(), srv)
	fmt.Fprintf(cmd.ErrOrStderr(), "PostgreSQL: %s\n", srv.Describe())
	o.PG = srv
	return runStress(cmd, o, asJSON, fail, html)
}
