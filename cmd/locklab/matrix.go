// locklab matrix: every strategy against every scenario; the matrix flags
// and run that locklab report shares.

package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/harness/render"
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
shortest counterexample), DEADLOCK, STARVATION, or n/a.`,
		Example: `  locklab matrix
  locklab matrix --strategy set-nx-px,setnx-del --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mr, err := g.runMatrix(cmd, &o, nodes)
			if err != nil {
				return err
			}
			defer mr.cluster.Close()
			m := mr.result
			w := cmd.OutOrStdout()
			if asJSON {
				err = render.JSON(w, m)
			} else {
				err = render.MatrixText(w, m)
			}
			if err != nil {
				return err
			}
			if fail && m.Violations() > 0 {
				return errViolation
			}
			return nil
		},
	}
	f := cmd.Flags()
	matrixFlags(f, &o, &nodes)
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.BoolVar(&fail, "fail-on-violation", false, "exit with status 1 when any cell is not SAFE or n/a")
	return cmd
}

// matrixFlags are the flags that bound a verdict matrix (matrix, report).
func matrixFlags(f *pflag.FlagSet, o *harness.MatrixOptions, nodes *int) {
	f.StringSliceVarP(&o.Strategies, "strategy", "s", nil, "restrict to these strategies")
	f.StringSliceVarP(&o.Scenarios, "scenario", "x", nil, "restrict to these scenarios")
	f.IntVar(&o.MaxPreemptions, "preemptions", 0, "most preemptions per schedule (default 2)")
	f.IntVar(&o.MaxSchedules, "max-schedules", 0, fmt.Sprintf("most schedules per cell (default %d)", harness.MatrixSchedules))
	f.IntVar(&o.Workers, "workers", 2, "schedules run at once per cell, each on its own database")
	f.IntVar(&o.Parallel, "parallel", 4, "cells explored at once")
	f.BoolVar(&o.Naive, "naive", false, "count the plain enumeration's schedules in every cell, running it where the reduction skipped some")
	f.IntVar(nodes, "nodes", 3, "Redis nodes to start (multi-node scenarios need 3)")
}

// matrixRun is a finished matrix and the nodes it ran on (still running:
// the caller closes the cluster).
type matrixRun struct {
	result  *harness.MatrixResult
	cluster *node.Cluster
	began   time.Time
}

// runMatrix starts the nodes (with a replica where a failover scenario
// needs one) and runs the matrix, with a progress line on stderr.
func (g *globals) runMatrix(cmd *cobra.Command, o *harness.MatrixOptions, nodes int) (*matrixRun, error) {
	ctx := cmd.Context()
	errw := cmd.ErrOrStderr()
	c, ns, err := g.cluster(ctx, errw, nodes)
	if err != nil {
		return nil, err
	}
	scs := o.Scenarios
	if len(scs) == 0 {
		scs = scenarioNames()
	}
	o.Nodes = withReplica(ctx, c, ns, namesNeedReplica(scs, o.Strategies))
	began := time.Now()
	st := newStatus(errw)
	o.Progress = func(cell harness.Cell) {
		st.set("%v %s × %s: %s", time.Since(began).Round(time.Second), cell.Strategy, cell.Scenario, cell.Outcome)
	}
	m, err := harness.Matrix(ctx, *o)
	st.clear()
	if err != nil {
		c.Close()
		return nil, err
	}
	return &matrixRun{result: m, cluster: c, began: began}, nil
}
