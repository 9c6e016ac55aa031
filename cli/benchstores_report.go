// What bench --stores reports: its JSON document and its table.

package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locklab/locklab/internal/tooling/benchutil"
)

// storesReport is bench --stores' JSON document (docs/schemas/bench.schema.json).
type storesReport struct {
	Rounds     int             `json:"rounds"`
	Cycles     int             `json:"cycles"`
	Contenders int             `json:"contenders"`
	ContendNs  int64           `json:"contend_ns"`
	Servers    []storesServer  `json:"servers"`
	Rows       []storesRowJSON `json:"rows"`
}

type storesServer struct {
	Store    string `json:"store"`
	Describe string `json:"describe"`
}

type storesRowJSON struct {
	Name     string `json:"name"`
	Store    string `json:"store"`
	Strategy string `json:"strategy"`
	Masters  int    `json:"masters,omitempty"`
	Skipped  string `json:"skipped,omitempty"`

	CycleMeanNs    int64   `json:"cycle_mean_ns,omitempty"`
	CycleP50Ns     int64   `json:"cycle_p50_ns,omitempty"`
	CycleP99Ns     int64   `json:"cycle_p99_ns,omitempty"`
	CycleRatio     float64 `json:"cycle_ratio,omitempty"`
	Locks          int64   `json:"locks,omitempty"`
	LocksPerSecond float64 `json:"locks_per_second,omitempty"`
	WaitP50Ns      int64   `json:"wait_p50_ns,omitempty"`
	WaitP99Ns      int64   `json:"wait_p99_ns,omitempty"`
	RetriedCycles  int     `json:"retried_cycles,omitempty"`

	// Where the store's bench says so (harness.Bench): the contenders
	// waited in the lock's own Lock, and their requests were counted.
	WaitsInLock      bool    `json:"waits_in_lock,omitempty"`
	Requests         int64   `json:"requests,omitempty"`
	LockCycles       int64   `json:"lock_cycles,omitempty"`
	RequestsPerCycle float64 `json:"requests_per_cycle,omitempty"`
}

// storesJSON is the document of the rows measured.
func storesJSON(o storesOptions, servers []storesServer, rows []*measuredRow) storesReport {
	rep := storesReport{Rounds: o.rounds, Cycles: o.cycles, Contenders: o.contenders, ContendNs: o.contendFor.Nanoseconds(),
		Servers: append([]storesServer{}, servers...), Rows: []storesRowJSON{}}
	base := baseline(rows)
	for _, r := range rows {
		j := storesRowJSON{Name: r.name(), Store: r.store, Strategy: r.strategy, Skipped: r.skipped}
		if r.nodes > 1 {
			j.Masters = r.nodes
		}
		if r.skipped == "" {
			w := benchutil.Summarize(r.contended.Waits)
			j.CycleMeanNs, j.CycleP50Ns, j.CycleP99Ns = int64(r.cycle.Mean), int64(r.cycle.P50), int64(r.cycle.P99)
			j.CycleRatio = float64(r.cycle.Mean) / float64(base.cycle.Mean)
			j.Locks, j.LocksPerSecond = r.contended.Locks, r.contended.PerSecond()
			j.WaitP50Ns, j.WaitP99Ns = int64(w.P50), int64(w.P99)
			j.RetriedCycles = r.retried
			j.WaitsInLock = r.waitsInLock
			if perCycle, ok := r.requestsPerCycle(); ok {
				j.Requests, j.LockCycles, j.RequestsPerCycle = r.requests.Load(), r.cycles.Load(), perCycle
			}
		}
		rep.Rows = append(rep.Rows, j)
	}
	return rep
}

// baseline is the row the cycles are compared to: the first measured.
func baseline(rows []*measuredRow) *measuredRow {
	for _, r := range rows {
		if r.skipped == "" {
			return r
		}
	}
	return nil
}

// printStores prints the table of the rows.
func printStores(w io.Writer, o storesOptions, servers []storesServer, rows []*measuredRow) error {
	for _, s := range servers {
		fmt.Fprintf(w, "%s: %s\n", storeTitle(s.Store), s.Describe)
	}
	fmt.Fprintf(w, "uncontended: %d rounds of %d cycles of each lock, one of each in turn, every cycle counted; contended: %d clients on one key, locklab.Wait's default policy, empty critical section, %d rounds of %v\n",
		o.rounds, o.cycles, o.contenders, o.rounds, o.contendFor)
	base := baseline(rows)
	ratio := "x"
	if base != nil {
		ratio = "x " + base.name()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "store\tlock\tcycle mean\tp50\tp99\t%s\tlocks/s\twait p50\twait p99\t\n", ratio)
	round := func(d time.Duration) time.Duration {
		if d >= time.Millisecond {
			return d.Round(10 * time.Microsecond)
		}
		return d.Round(time.Microsecond)
	}
	for _, r := range rows {
		if r.skipped != "" {
			continue
		}
		wt := benchutil.Summarize(r.contended.Waits)
		fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%v\t%.2f\t%.0f\t%v\t%v\t\n", r.store, r.name(),
			round(r.cycle.Mean), round(r.cycle.P50), round(r.cycle.P99), float64(r.cycle.Mean)/float64(base.cycle.Mean),
			r.contended.PerSecond(), round(wt.P50), round(wt.P99))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.skipped != "" {
			fmt.Fprintf(w, "%s %s: skipped, %s\n", r.store, r.name(), r.skipped)
		}
		if r.retried > 0 {
			what := "acquires"
			if r.retried == 1 {
				what = "acquire"
			}
			fmt.Fprintf(w, "%s %s: %d uncontended %s tried again after a failure worth another try (nodes too slow to answer)\n", r.store, r.name(), r.retried, what)
		}
		if r.skipped != "" || !r.waitsInLock && !r.counting {
			continue
		}
		var says []string
		if r.waitsInLock {
			says = append(says, "contenders wait in its own blocking Lock, not with locklab.Wait")
		}
		if perCycle, ok := r.requestsPerCycle(); ok {
			says = append(says, fmt.Sprintf("%.1f requests per contended lock cycle (%d requests, %d cycles, heartbeats aside)",
				perCycle, r.requests.Load(), r.cycles.Load()))
		}
		fmt.Fprintf(w, "%s %s: %s\n", r.store, r.name(), strings.Join(says, "; "))
	}
	return nil
}

// storeTitle is how the table's header names a store.
