// stress on the stores other than Redis: the servers of the store the
// strategy's family names (stress.LookupStore), started for the run.

package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/stores/redis"
	"github.com/locklab/locklab/strategies"
)

// runStressStore runs a strategy of store sd on servers of it that it
// starts on the backend (local processes or containers; addrs gives Redis
// servers only), with the store's node faults (sd.Faults). The TTL
// defaults to the store's lease granularity where it has one (sd.Lease).
func runStressStore(cmd *cobra.Command, g *globals, sd *stress.StoreDriver, o stress.Options, asJSON, fail bool, html string) error {
	if g.addrsBackend() {
		return fmt.Errorf("strategy %s locks on %s, which the addrs backend does not give: use --backend process", o.Strategy, sd.Title)
	}
	for _, f := range o.Faults {
		if !slices.Contains(sd.Faults, f) {
			return g.args.badFlag(cmd, "node-faults", f.String(), "a run on %s injects %s", sd.Title, fault.Join(sd.Faults))
		}
	}
	if sd.Lease > 0 {
		if !cmd.Flags().Changed("ttl") {
			o.TTL = sd.Lease
		}
		if o.TTL < sd.Lease || o.TTL%sd.Lease != 0 {
			return g.args.badFlag(cmd, "ttl", o.TTL.String(), "%s's leases are %s's, in %s: give %v, %v, ...",
				o.Strategy, sd.Title, sd.LeaseWords(), sd.Lease, 2*sd.Lease)
		}
	}
	if err := stores.Installed(sd.Name); err != nil {
		return fmt.Errorf("strategy %s locks on %s: %w", o.Strategy, sd.Title, err)
	}
	backend, err := stores.Backend(cmd.Context(), g.backend)
	if err != nil {
		return err
	}
	errw := cmd.ErrOrStderr()
	srv, err := stores.Start(cmd.Context(), backend, []string{o.Strategy}, func(line string) { fmt.Fprintln(errw, line) })
	if err != nil {
		return err
	}
	defer closeAndTell(errw, srv)
	o.Store = srv.First(sd.Name)
	return runStress(cmd, o, asJSON, fail, html)
}

// storeFault refuses, for a strategy of no store but Redis, the node
// faults that strike a store's servers alone (stress.StoreDriver.Own):
// the error names the strategies that take it.
func storeFault(faults []fault.Fault) error {
	for _, f := range faults {
		var says []string
		for _, sd := range stress.Stores() {
			if own := sd.Own[f]; own != "" && slices.Contains(sd.Faults, f) {
				says = append(says, fmt.Sprintf("%s (%s)", own, strings.Join(familyStrategies(sd.Name), ", ")))
			}
		}
		if len(says) > 0 {
			return fmt.Errorf("--node-faults %s %s", f, strings.Join(says, ", or "))
		}
	}
	return nil
}

// unknownFault is why --node-faults refuses a name: the node faults, the
// stores' own (stress.StoreDriver.Own) said with the stores that inject
// them.
func unknownFault() string {
	kinds := []string{fault.Join(redis.StressNodeFaults), fault.Failover.String(), fault.ClusterFailover.String()}
	var owned []fault.Fault
	on := map[fault.Fault][]string{}
	for _, sd := range stress.Stores() {
		for _, f := range sd.Faults {
			if sd.Own[f] != "" {
				if on[f] == nil {
					owned = append(owned, f)
				}
				on[f] = append(on[f], sd.Title)
			}
		}
	}
	for _, f := range owned {
		kinds = append(kinds, fmt.Sprintf("(on %s) %s", strings.Join(on[f], " or "), f))
	}
	last := len(kinds) - 1
	return "unknown node fault; the node faults are " + strings.Join(kinds[:last], ", ") + " or " + kinds[last]
}

// injects reports whether a run on store sd (nil: Redis) injects f.
func injects(sd *stress.StoreDriver, f fault.Fault) bool {
	return sd != nil && slices.Contains(sd.Faults, f)
}

// familyStrategies names the strategies of family.
func familyStrategies(family string) []string {
	var out []string
	for _, d := range strategies.All() {
		if d.Family == family {
			out = append(out, d.Name)
		}
	}
	return out
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
