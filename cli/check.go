// locklab check: a read-only look at a Redis deployment, and the scenarios
// of the matrix it is exposed to.

package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/deploy"
	"github.com/locklab/locklab/harness/render"
	"github.com/locklab/locklab/internal/tooling/redisaddr"
)

func newCheckCmd(g *globals) *cobra.Command {
	var (
		o                          deploy.Options
		asJSON                     bool
		masterUser, masterPassword string
	)
	cmd := &cobra.Command{
		Use:   "check --addr URL",
		Short: "Read a Redis deployment's settings and tell which scenarios of the matrix it is exposed to",
		Long: `check reads the server given with --addr, without writing anything (PING,
INFO, CONFIG GET, ROLE, TIME, PUBSUB NUMSUB; CLUSTER INFO and CLUSTER NODES in
cluster mode; SENTINEL MASTERS on a Sentinel, whose master it then reads with
the same user, password and TLS, or with --master-user and --master-password
where the master's differ: the URL's then reach the Sentinel alone), and
reports what the deployment is exposed to:

  eviction     a maxmemory-policy that evicts lock keys
  persistence  no AOF, or appendfsync other than always (restart-loses-lock)
  failover     asynchronous replicas, Sentinel (failover-loses-lock)
  cluster      cluster mode: CROSSSLOT, no independent masters
  clock        the server's clock against this host's (the timestamp locks)
  rtt          the round trip against Redlock's node timeout

For each it names the strategies that stay safe there and those the recorded
matrix shows failing, with the locklab demo command that replays the cell.
A command the server refuses (NOPERM for an ACL user, a renamed CONFIG)
leaves its check unknown. The exit status is 0 when the report ran, whatever
it found; 2 when the server could not be reached or a flag is wrong.`,
		Example: `  locklab check --addr 10.0.0.5:6379
  locklab check --addr rediss://alice:s3cret@redis.internal:6380/2 --json
  locklab check --addr redis://10.0.0.9:26379 --master-name locks   # a Sentinel
  locklab check --addr redis://10.0.0.9:26379 --master-password s3cret   # a Sentinel without a password, its master with one`,
		Args: usageArgs(0, 0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			po, err := g.checkAddr(cmd)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("master-user") || f.Changed("master-password") {
				if masterUser != "" && masterPassword == "" {
					return g.args.badFlag(cmd, "master-user", masterUser, "give the user's password with --master-password")
				}
				o.MasterAuth = &deploy.Auth{Username: masterUser, Password: masterPassword}
			}
			if err := g.strategies(cmd, "strategy", o.Strategies); err != nil {
				return err
			}
			for _, s := range o.Strategies {
				if !slices.Contains(deploy.Strategies(), s) {
					return g.args.badFlag(cmd, "strategy", s, "not a strategy of the recorded matrix; those are %s",
						strings.Join(deploy.Strategies(), ", "))
				}
			}
			rep, err := deploy.CheckPool(cmd.Context(), po, o)
			var ns *deploy.NotSentinelError
			if errors.As(err, &ns) {
				// The flags as given, the password's value left out.
				var given, names []string
				for _, name := range []string{"master-name", "master-user", "master-password"} {
					if f.Changed(name) {
						flag := g.args.spell(cmd, name)
						names = append(names, flag)
						if name != "master-password" {
							flag += " " + quote(f.Lookup(name).Value.String())
						}
						given = append(given, flag)
					}
				}
				return fmt.Errorf("%s: --addr %s is not a Sentinel but a %s server, which has no master to name or log in to; %s %s for a Sentinel only",
					strings.Join(given, ", "), po.Redacted(), ns.Mode, strings.Join(names, ", "), plural(len(names), "is", "are"))
			}
			if err != nil {
				// One line that names the server, without the library's
				// prefixes ("locklab: ", "deploy: ") inside it.
				msg := strings.NewReplacer("locklab: ", "", "deploy: ", "", "invalid argument: ", "").Replace(errorLine(err))
				if errors.Is(err, locklab.ErrInvalid) && o.MasterName == "" {
					msg += " with --master-name"
				}
				return fmt.Errorf("--addr %s: %s", po.Redacted(), msg)
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return render.JSON(w, rep)
			}
			return deploy.WriteText(w, rep)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringSliceVarP(&o.Strategies, "strategy", "s", nil, "restrict the safe and failing lists to these strategies")
	f.StringVar(&o.MasterName, "master-name", "", "on a Sentinel watching several masters, the one to check")
	f.StringVar(&masterUser, "master-user", "", "on a Sentinel: the ACL user to log in to the master with, in place of --addr's (give --master-password too)")
	f.StringVar(&masterPassword, "master-password", "", "on a Sentinel: the password to log in to the master with, in place of --addr's, which then reaches the Sentinel alone ('' for none)")
	durFlag(f, &o.TTL, "ttl", deploy.DefaultTTL, durRange{min: time.Millisecond}, "the TTL the locks are taken with: Redlock's node timeout is a fiftieth of it, within its bounds")
	durFlag(f, &o.NodeTimeout, "node-timeout", 0, durRange{zero: "Redlock's default for --ttl"}, "the node timeout Redlock runs with")
	durFlag(f, &o.MaxSkew, "max-skew", deploy.DefaultMaxSkew, durRange{positive: true}, "how far the server's clock may be from this host's before the timestamp locks count as exposed")
	intFlag(f, &o.Pings, "pings", "", deploy.DefaultPings, intRange{min: 1, max: 1000}, "PINGs the round trip is the median of")
	return cmd
}

// checkAddr reads the one server check reads, given with --addr, and
// refuses the flags that start servers.
func (g *globals) checkAddr(cmd *cobra.Command) (locklab.PoolOptions, error) {
	const want = "host:port, password@host:port or a URL redis://[user:password@]host:port[/db] (rediss:// for TLS)"
	if cmd.Flag("backend").Changed {
		return locklab.PoolOptions{}, fmt.Errorf("check reads the server given with --addr and starts none: %s does not apply",
			g.args.spell(cmd, "backend"))
	}
	switch {
	case !cmd.Flag("addr").Changed:
		return locklab.PoolOptions{}, fmt.Errorf("check needs --addr: the server to read, %s", want)
	case len(g.addrs) == 0:
		return locklab.PoolOptions{}, g.args.badFlag(cmd, "addr", "", "must be %s", want)
	case len(g.addrs) != 1:
		return locklab.PoolOptions{}, fmt.Errorf("check reads one server, and --addr gives %d: %s", len(g.addrs), cutList(quote, redactAll(g.addrs)))
	}
	a := g.addrs[0]
	if strings.TrimSpace(a) == "" {
		return locklab.PoolOptions{}, g.args.badFlag(cmd, "addr", a, "must be %s", want)
	}
	po, err := redisaddr.Parse(a)
	if err != nil {
		return po, g.args.badFlag(cmd, "addr", redact(a), "%s", addrWhy(err))
	}
	return po, nil
}

func redactAll(addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = redact(a)
	}
	return out
}
