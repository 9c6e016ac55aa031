// The Redis nodes a command runs on: started on the chosen backend, with a
// replica where a failover scenario needs one.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/redisaddr"
	"github.com/locklab/locklab/stores/redis/redisnode"
	"github.com/locklab/locklab/strategies"
)

// errViolation is returned, with --fail-on-violation, when a run found what
// it looked for: exit status 1.
var errViolation = errors.New("violation found")

// checkServers checks --backend and --addr, before a command starts
// anything: the backend is one of the three; --addr gives servers, each
// one ParseAddr reads, and goes with the addrs backend, which it picks
// when --backend is not given (LOCKLAB_BACKEND included).
func (g *globals) checkServers(cmd *cobra.Command) error {
	given := g.args.spell(cmd, "backend") + " " + quote(g.backend)
	if !cmd.Flag("backend").Changed {
		given = "LOCKLAB_BACKEND=" + quote(g.backend)
	}
	switch g.backend {
	case "", backends.Docker, backends.Process, backends.Addrs:
	default:
		return fmt.Errorf("%s: must be docker, process or addrs", given)
	}
	const want = "must be host:port, password@host:port or a URL redis://[user:password@]host:port[/db] (rediss:// for TLS)"
	if cmd.Flag("addr").Changed && len(g.addrs) == 0 {
		return g.args.badFlag(cmd, "addr", "", want)
	}
	for _, a := range g.addrs {
		if strings.TrimSpace(a) == "" {
			return g.args.badFlag(cmd, "addr", a, want)
		}
		if _, err := redisaddr.Parse(a); err != nil {
			return g.args.badFlag(cmd, "addr", redact(a), "%s", addrWhy(err))
		}
	}
	if len(g.addrs) > 0 {
		switch {
		case g.backend == "" || !cmd.Flag("backend").Changed:
			g.backend = backends.Addrs
		case g.backend != backends.Addrs:
			return fmt.Errorf("--addr names servers you run, for --backend addrs; %s starts its own", given)
		}
	}
	if g.backend == backends.Addrs && len(g.addrs) == 0 {
		return fmt.Errorf("%s needs --addr host:port (repeat --addr for several servers)", given)
	}
	return nil
}

// addrWhy is what is wrong with an --addr value, from ParseAddr's error,
// without the address itself, which the flag's message already shows
// (redacted).
func addrWhy(err error) string {
	why := errorLine(err)
	for _, p := range []string{"locklab: ", "invalid argument: ", "node: "} {
		why = strings.TrimPrefix(why, p)
	}
	return addrQuoted.ReplaceAllString(why, "")
}

// addrQuoted is the address ParseAddr and ParseURL quote at the start of
// their messages.
var addrQuoted = regexp.MustCompile(`^(malformed address|redis URL) "[^"]*": `)

// redact hides the password of an address given with --addr, parsed or
// not (locklab.RedactURL): "password@host:port", "redis://user:password@host"
// and "redis://password@host" (a password alone, as redis-cli reads it),
// whatever characters the password holds.
func redact(a string) string { return locklab.RedactURL(a) }

// refused fails at once when nothing listens at an address given with
// --addr, which redisnode.Start would retry for seconds, as it does for a
// server that is starting. Other dial failures are redisnode.Start's to tell.
func refused(ctx context.Context, addrs []string) error {
	errs := make([]error, len(addrs))
	done := make(chan struct{})
	for i, a := range addrs {
		go func() {
			defer func() { done <- struct{}{} }()
			o, err := redisaddr.Parse(a)
			if err != nil {
				return
			}
			d := net.Dialer{Timeout: 500 * time.Millisecond}
			c, err := d.DialContext(ctx, "tcp", o.Addr)
			if err == nil {
				c.Close()
			} else if errors.Is(err, syscall.ECONNREFUSED) {
				errs[i] = fmt.Errorf("--addr %s: connection refused: no server listens at %s", redact(a), o.Addr)
			}
		}()
	}
	for range addrs {
		<-done
	}
	var msgs []string
	for _, err := range errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(cutList(func(s string) string { return s }, msgs, "; "))
}

// cluster starts n Redis nodes on the chosen backend; the caller closes it.
func (g *globals) cluster(ctx context.Context, w io.Writer, n int) (*redisnode.Cluster, []harness.Node, error) {
	opts := redisnode.Options{Backend: g.backend, N: n, Image: g.image, Addrs: g.addrs}
	if len(g.addrs) > 0 {
		if opts.Backend == "" {
			opts.Backend = backends.Addrs
		}
		if opts.Backend == backends.Addrs {
			opts.N = len(g.addrs)
			if err := refused(ctx, g.addrs); err != nil {
				return nil, nil, err
			}
		}
	}
	c, err := redisnode.Start(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(w, "Redis: %s\n", c.Describe())
	out := make([]harness.Node, 0, len(c.Nodes()))
	for _, nd := range c.Nodes() {
		out = append(out, nd)
	}
	return c, out, nil
}

// withReplica gives the first node an asynchronous replica when need is
// set (needsReplica), where the backend can start one.
func withReplica(ctx context.Context, c *redisnode.Cluster, nodes []harness.Node, need bool) []harness.Node {
	if !need || c.Backend() == backends.Addrs {
		return nodes
	}
	r, err := c.Replicated(ctx, c.Nodes()[0])
	if err != nil {
		return nodes // the failover scenarios are then n/a
	}
	return append([]harness.Node{r}, nodes[1:]...)
}

// needsReplica reports whether a case fails over or waits for a replica.
func needsReplica(cases ...harness.Case) bool {
	for _, cs := range cases {
		if slices.Contains(cs.Scenario.Needs, fault.Failover) || cs.Strategy.Replica {
			return true
		}
	}
	return false
}

// namesNeedReplica is needsReplica for the matrix, which resolves its
// names itself: whether a scenario fails over or a strategy (empty: all
// registered) waits for a replica. Names it does not know are the
// matrix's to refuse.
func namesNeedReplica(scenarios, strats []string) bool {
	if len(strats) == 0 {
		strats = strategies.Names()
	}
	fo, rs := failoverScenarios(), replicaStrategies()
	return slices.ContainsFunc(scenarios, func(n string) bool { return slices.Contains(fo, n) }) ||
		slices.ContainsFunc(strats, func(n string) bool { return slices.Contains(rs, n) })
}

// failoverScenarios names the scenarios that fail a node over.
func failoverScenarios() []string {
	var out []string
	for _, sc := range harness.Scenarios() {
		if slices.Contains(sc.Needs, fault.Failover) {
			out = append(out, sc.Name)
		}
	}
	return out
}

// replicaStrategies names the strategies that wait for a replica.
func replicaStrategies() []string {
	var out []string
	for _, name := range strategies.Names() {
		if d, err := strategies.Info(name); err == nil && d.Replica {
			out = append(out, name)
		}
	}
	return out
}

func scenarioNames() []string {
	var out []string
	for _, sc := range harness.Scenarios() {
		out = append(out, sc.Name)
	}
	return out
}
