// locklab play: a browser game where the participant is the scheduler.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab/harness/play"
)

// playArgs are play's flags.
type playArgs struct {
	addr    string
	max     int
	idle    time.Duration
	docsURL string
	strat   string
}

func newPlayCmd(g *globals) *cobra.Command {
	var a playArgs
	cmd := &cobra.Command{
		Use:   "play [level | scenario -s strategy]",
		Short: "Serve a browser game where you are the scheduler, on real Redis, etcd, ZooKeeper and PostgreSQL",
		Long: `play serves a page where you pick which client of a scenario moves next.
Each client is a column with a button showing the exact Redis command it
sends next; the faults the scenario allows (time passes, crash, skew,
restart, failover) are buttons too. Every click runs that one command on a
real Redis server, the swimlane grows by a row with the key's value on every
node, and the checkers say at once when two clients hold the lock, a release
deletes another's lock, or a stale write gets through. "hint" shows the next
step of a counterexample (the scenario's own schedule where it breaks the
level, else the shortest the explorer finds; play explores every level in
the background from the start); "undo" replays every step but the last on
fresh Redis; "reset" starts over.

The levels go from the C1/C2 race of the SETNX page to Redlock's stale
writer, then etcd's lease outlived by a paused holder (and the key's
revision as the fence that refuses its write), go-zookeeper's lock with
no fence to refuse a stale write (nor after a new session), a PostgreSQL
restart that ends an advisory lock's session, and a failover to a standby
that never saw the lock table's row; the browser remembers which are
solved. The etcd,
ZooKeeper and PostgreSQL levels start a three-member etcd cluster, a
three-server ZooKeeper ensemble or a throwaway PostgreSQL server of the
session's own, as local processes on
any backend; where those are not installed the page lists the level as
unavailable, with the reason. The optional argument names
the first level to open (` + levelIDs() + `),
or a scenario of "locklab scenarios" to play on the strategy given with -s,
added as the first level.

Every browser session gets Redis servers of its own (redis-server processes
with --backend process, containers with docker), so a room can play against
one "locklab play": sessions idle for --idle are closed, at most
--max-sessions run at once, and everything is removed when play ends
(Ctrl-C included). It listens on 127.0.0.1 only, unless --http says
otherwise.`,
		Example: `  locklab play --backend process                       # then open http://127.0.0.1:8080/
  locklab play redlock-pause --backend process
  locklab play clock-skew -s set-nx-px --backend process    # any scenario on any strategy
  locklab play --backend process --http 0.0.0.0:8080   # a workshop room: anyone on the network can play`,
		Args: usageArgs(0, 1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runPlay(cmd, &a, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&a.addr, "http", "127.0.0.1:8080", "address to listen on; 0.0.0.0:PORT lets a whole room play (with a warning)")
	intFlag(f, &a.max, "max-sessions", "", 40, atLeast(1), "most participants at once; the next one is told the room is full")
	durFlag(f, &a.idle, "idle", 10*time.Minute, durRange{positive: true}, "close a participant's session after this long without a click")
	f.StringVar(&a.docsURL, "docs-url", play.DefaultDocsURL, "where the levels' documentation pages are")
	f.StringVarP(&a.strat, "strategy", "s", "", "play the scenario given as argument on this strategy (see locklab list)")
	return serverCmd(cmd)
}

// runPlay runs "locklab play": it checks its arguments, listens, and
// serves the game until the command's context ends.
func (g *globals) runPlay(cmd *cobra.Command, a *playArgs, args []string) error {
	page, extra, err := g.playFirstLevel(cmd, a.strat, args)
	if err != nil {
		return err
	}
	if g.addrsBackend() {
		return errors.New("play starts Redis servers of its own for every participant: use --backend process or docker, not addrs")
	}
	host, _, err := net.SplitHostPort(a.addr)
	if err != nil {
		return g.args.badFlag(cmd, "http", a.addr, "must be host:port, such as 127.0.0.1:8080 or 0.0.0.0:8080")
	}
	if u, err := url.Parse(a.docsURL); err != nil || !strings.HasSuffix(u.Path, "/") {
		return g.args.badFlag(cmd, "docs-url", a.docsURL, "must be a URL that ends in /, such as %s", play.DefaultDocsURL)
	}
	// Listen first: an address in use is told before any server
	// starts.
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		return g.args.badFlag(cmd, "http", a.addr, "%v", unwrapOp(err))
	}
	defer ln.Close()
	srv, err := play.New(play.Options{Start: play.ClusterServers(g.backend, g.image), MaxSessions: a.max, Idle: a.idle,
		DocsURL: a.docsURL, Log: cmd.ErrOrStderr(), WarmHints: true, Extra: extra})
	if err != nil {
		return err
	}
	defer srv.Close()
	if ip := net.ParseIP(host); host == "" || ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(cmd.ErrOrStderr(), "WARNING: listening on %s: anyone who can reach this machine on the network can play, and each player starts Redis servers here (at most %d sessions at once).\n", ln.Addr(), a.max)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "locklab play: open http://%s%s (Ctrl-C to stop)\n", browsable(ln.Addr().String()), page)
	return servePlay(cmd.Context(), w, ln, srv)
}

// playFirstLevel is the page play opens on ("/#level") for its argument,
// a level or a scenario to play on strategy strat, and the level that
// scenario adds.
func (g *globals) playFirstLevel(cmd *cobra.Command, strat string, args []string) (string, []play.Level, error) {
	page := "/"
	var extra []play.Level
	switch {
	case strat != "":
		if len(args) == 0 {
			return "", nil, errors.New("-s names the strategy to play a scenario on: give the scenario too (locklab scenarios lists them)")
		}
		sc, err := scenarioArg(args[0])
		if err != nil {
			return "", nil, err
		}
		if _, err := g.resolve(cmd, sc, "strategy", strat); err != nil {
			return "", nil, err
		}
		l, err := play.CustomLevel(args[0], strat)
		if err != nil {
			return "", nil, err
		}
		extra = append(extra, l)
		page = "/#" + l.ID
	case len(args) == 1:
		if !strings.Contains(" "+levelIDs()+",", " "+args[0]+",") {
			return "", nil, fmt.Errorf("unknown level %q: valid levels are %s; or play a scenario on a strategy: locklab play SCENARIO -s STRATEGY", args[0], levelIDs())
		}
		page = "/#" + args[0]
	}
	return page, extra, nil
}

// servePlay serves h on ln until ctx ends, then shuts the HTTP server
// down, waiting at most 5 seconds for its requests in progress.
func servePlay(ctx context.Context, w io.Writer, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(w, "\nstopping: closing every session and its servers")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	return nil
}

// unwrapOp is a network error without its "listen tcp ADDR:" prefix, which
// the message that quotes the flag already says.
func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

// browsable turns a listening address into one a browser can open.
func browsable(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return a
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func levelIDs() string {
	var ids []string
	for _, l := range play.Levels() {
		ids = append(ids, l.ID)
	}
	return strings.Join(ids, ", ")
}
