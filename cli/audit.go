// The servers' audit on a command's run: the clients the servers the
// command started counted beside the ones the harness opened
// (harness.StartAudit, each store's Driver.Audit).

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/audit"
)

// serversAudit is the audit of the servers a command started, store by
// store. On the servers --addr names it does not run: the audit counts
// every client a server accepted, and there the user's own clients would
// count too; a command on servers the user runs only reads, and says
// nothing of clients beside its own.
type serversAudit struct {
	checks []func(context.Context) error
	// ran: the audit read the servers.
	ran bool
}

// startAudit reads the counts of each store's servers (nodes, by the
// store's name) before the runs, where the command started them.
func (g *globals) startAudit(ctx context.Context, nodes map[string][]harness.Node) (*serversAudit, error) {
	a := &serversAudit{}
	if g.addrsBackend() {
		return a, nil
	}
	for _, store := range slices.Sorted(maps.Keys(nodes)) {
		check, err := harness.StartAudit(ctx, store, nodes[store])
		if err != nil {
			return nil, fmt.Errorf("reading the servers' counts of their clients: %w", err)
		}
		a.checks = append(a.checks, check)
		if d, err := harness.LookupStore(store); err == nil && d.Audit != nil && len(nodes[store]) > 0 {
			a.ran = true
		}
	}
	return a, nil
}

// auditResult is what the audit found once the runs were over: --json's
// "audit".
type auditResult struct {
	// Ran is whether the audit read the servers: not on the servers
	// --addr names, nor on a store whose servers count no clients
	// (etcd's).
	Ran bool `json:"ran"`
	// Hidden says, a line for each server, the clients it counted that
	// the harness did not open: a lock's own, beside the client its
	// factory was given. None is empty.
	Hidden []string `json:"hidden,omitempty"`
	// Unread names the servers the audit could not read, and why.
	Unread []string `json:"unread,omitempty"`
}

// check reads the servers' counts again, once the runs are over; the
// servers it could not read are told on w.
func (a *serversAudit) check(ctx context.Context, w io.Writer) auditResult {
	if ctx.Err() != nil {
		return auditResult{} // interrupted: nothing to read with
	}
	r := auditResult{Ran: a.ran}
	for _, check := range a.checks {
		hidden, unread := audit.Split(check(ctx))
		r.Hidden = append(r.Hidden, hidden...)
		for _, err := range unread {
			r.Unread = append(r.Unread, err.Error())
			fmt.Fprintln(w, "locklab: the servers' audit could not read", errorLine(err))
		}
	}
	return r
}

// err is the command's error when a server counted a client the harness
// did not open: a lock among strats talked to it through a client of its
// own, whose requests no schedule ran.
func (r auditResult) err(strats []string) error {
	if len(r.Hidden) == 0 {
		return nil
	}
	who := "a lock"
	switch {
	case len(strats) == 1:
		who = strats[0]
	case len(strats) > 1:
		who = "one of the locks " + strings.Join(strats, ", ")
	}
	return fmt.Errorf("%w: %s talked to its servers through a client of its own beside the one its factory was given: "+
		"the harness scheduled none of that client's requests, and no verdict covers them: %s",
		errHidden, who, strings.Join(r.Hidden, "; "))
}

// withRun is the error of a run that failed (err), led by the audit's
// where a server counted a client the harness did not open: the likely
// cause.
func (r auditResult) withRun(strats []string, err error) error {
	if herr := r.err(strats); herr != nil {
		return fmt.Errorf("%w (the run: %v)", herr, err)
	}
	return err
}

// errHidden is the error of a run whose servers counted clients the
// harness did not open (exit status 2).
var errHidden = errors.New("the servers' audit")

// auditNodes are the servers of a matrix by their store's name: the Main
// store's (Redis) nodes and every other store's.
func auditNodes(main []harness.Node, others map[string][]harness.Node) map[string][]harness.Node {
	out := maps.Clone(others)
	if out == nil {
		out = map[string][]harness.Node{}
	}
	if d, err := harness.MainStore(); err == nil && len(main) > 0 {
		out[d.Name] = main
	}
	return out
}

// mergeAudits puts the audits of a matrix's shards together: it ran where
// it ran on every shard, and says what each one's servers counted; nil
// where no shard says (the --json of a matrix that had no audit).
func mergeAudits(parts []*auditResult) *auditResult {
	var out *auditResult
	for _, p := range parts {
		if p == nil {
			continue
		}
		if out == nil {
			out = &auditResult{Ran: true}
		}
		out.Ran = out.Ran && p.Ran
		out.Hidden = append(out.Hidden, p.Hidden...)
		out.Unread = append(out.Unread, p.Unread...)
	}
	return out
}
