package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/strategies"
)

// TestBadCommandLines runs the CLI, as a process of its own, on a bad value
// of every flag and argument of every command, and checks that each is
// refused before any server starts, in one line that names the flag as
// typed and what it accepts, with exit status 2. The redis-server it
// would start is a script that leaves a mark when run, and the Docker
// engine is out of reach (--backend process), so a check that came after
// the servers started would fail here.
func TestBadCommandLines(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "redis-server")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\ntouch \"$0.started\"\nexit 1\n"), 0o755))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { busy.Close() }) // after the parallel subtests

	strats := strings.Join(strategies.Names(), ", ")
	sc, err := harness.Lookup("release-after-expiry")
	require.NoError(t, err)
	rae := applicable(sc)
	scens := strings.Join(scenarioNames(), ", ")
	const addrWant = "must be host:port, password@host:port or a URL redis://[user:password@]host:port[/db] (rediss:// for TLS)"
	stress := []string{"stress", "-s", "set-nx-px"}
	explore := []string{"explore", "-s", "setnx-del", "-x", "stale-recovery"}
	demo := []string{"demo", "stale-recovery", "-s", "setnx-del"}
	cases := []struct {
		args []string
		env  string // one VAR=value for the run
		want string // the whole line after "locklab: "; a prefix when it ends in "..."
	}{
		// Every command: --backend, LOCKLAB_BACKEND, --addr, and arguments.
		{args: []string{"race-demo", "--backend", "bogus"}, want: "--backend bogus: must be docker, process or addrs"},
		{args: []string{"race-demo"}, env: "LOCKLAB_BACKEND=bogus", want: "LOCKLAB_BACKEND=bogus: must be docker, process or addrs"},
		{args: []string{"race-demo", "--addr", ""}, want: "--addr '': " + addrWant},
		{args: []string{"race-demo", "--backend", "addrs"}, want: "--backend addrs needs --addr host:port (repeat --addr for several servers)"},
		{args: []string{"race-demo", "--backend", "process", "--addr", "127.0.0.1:1"},
			want: "--addr names servers you run, for --backend addrs; --backend process starts its own"},
		{args: []string{"race-demo", "--addr", "secret@host:x"}, want: `--addr xxxxx@host:x: port "x" is not a number in 1..65535`},
		{args: []string{"race-demo", "extra"}, want: "race-demo takes no arguments, got 1: extra (see locklab race-demo --help)"},
		{args: []string{"race-demo", "--bogus"}, want: "unknown flag: --bogus"},
		{args: []string{"benc"}, want: `unknown command "benc" for "locklab"; did you mean bench?`},
		{args: []string{"list", "extra"}, want: "list takes no arguments, got 1: extra (see locklab list --help)"},
		{args: []string{"list", "--json=maybe"}, want: "--json maybe: must be true or false"},
		{args: []string{"scenarios", "a", "b"}, want: "scenarios takes no arguments, got 2: a b (see locklab scenarios --help)"},

		// bench
		{args: []string{"bench", "--cycles", "0"}, want: "--cycles 0: must be a whole number, 1 or more"},
		{args: []string{"bench", "--cycles", "-5", "--rounds", "-1"}, want: "--cycles -5: must be a whole number, 1 or more"},
		{args: []string{"bench", "--rounds", "x"}, want: "--rounds x: must be a whole number, 1 or more"},
		{args: []string{"bench", "-s", "set-nx-px,nosuch"}, want: "-s nosuch: unknown strategy; the strategies are " + strats},
		{args: []string{"bench", "-s", "etcd-lease"}, want: "-s etcd-lease: locks on etcd, not Redis: measure it with --stores etcd"},
		{args: []string{"bench", "--strategy", "set-nx-px,pg-advisory"}, want: "--strategy pg-advisory: locks on postgres, not Redis: measure it with --stores postgres"},
		{args: []string{"bench", "--stores", "redis,mongo"}, want: "--stores mongo: unknown store; the stores are redis, etcd, postgres, zookeeper"},
		{args: []string{"bench", "--stores", ""}, want: "--stores '': names no store; the stores are redis, etcd, postgres, zookeeper"},
		{args: []string{"bench", "--stores", "redis", "-s", "set-nx-px"}, want: "-s and --stores: choose one (--stores measures its stores' locks)"},
		{args: []string{"bench", "--stores", "etcd", "--polling"}, want: "--polling and --stores: choose one"},
		{args: []string{"bench", "--json"}, want: "--json prints the comparison of --stores: give --stores too"},
		{args: []string{"bench", "--stores", "redis", "--contenders", "1"}, want: "--contenders 1: must be a whole number, 2 or more"},
		{args: []string{"bench", "--stores", "redis", "--contend-time", "0"}, want: "--contend-time 0: must be a duration more than 0, such as 100ms, 2s or 1m"},
		{args: []string{"bench", "--contend-time", "2s"}, want: "--contend-time 2s: applies to --stores only"},
		{args: []string{"bench", "--contenders", "4"}, want: "--contenders 4: applies to --stores only"},
		{args: []string{"bench", "--stores", "redis", "--hold", "5ms"}, want: "--hold 5ms: applies to --polling only"},
		{args: []string{"bench", "--poll-time", "2s"}, want: "--poll-time 2s: applies to --polling only"},
		{args: []string{"bench", "--polling", "--cycles", "10"}, want: "--cycles 10: does not apply to --polling, which runs each row for --poll-time"},

		// demo
		{args: []string{"demo"}, want: "demo needs a scenario: locklab demo <scenario> (locklab scenarios lists them)"},
		{args: []string{"demo", "a", "b"}, want: "demo takes one argument, got 2: a b (see locklab demo --help)"},
		{args: []string{"demo", "nosuch"}, want: `unknown scenario "nosuch"; the scenarios are ` + scens},
		{args: []string{"demo", "stale-recovery", "--strategy", "nosuch"}, want: "--strategy nosuch: unknown strategy; the strategies are " + strats},
		{args: []string{"demo", "redlock-restart", "-s", "setnx-del"}, want: "-s setnx-del: scenario redlock-restart does not apply to this strategy; it applies to redlock"},
		{args: append(demo, "--schedule", "c9"), want: "--schedule c9: step c9 names client c9, and stale-recovery on setnx-del has 3 clients (c1 to c3)"},
		{args: append(demo, "--schedule", "c1 crash(c4)"), want: "--schedule 'c1 crash(c4)': step crash(c4) names client c4, and stale-recovery on setnx-del has 3 clients (c1 to c3)"},
		{args: append(demo, "--schedule", "c1 restart(n2)"), want: "--schedule 'c1 restart(n2)': step restart(n2) names node n2, and stale-recovery on setnx-del runs on 1 node (n1)"},
		{args: append(demo, "--schedule", "c1 failover(n1)"), want: "--schedule 'c1 failover(n1)': step failover(n1) needs a replica to promote, and stale-recovery on setnx-del starts none; one starts for scenario failover-loses-lock and for strategy set-nx-px-wait"},
		{args: append(demo, "--schedule", "c1 x("), want: `--schedule 'c1 x(': step "x(": missing ')'`},
		{args: append(demo, "--schedule", "c0"), want: `--schedule c0: step "c0": clients are numbered from c1`},
		{args: append(demo, "--schedule", "c1 restart(n0)"), want: `--schedule 'c1 restart(n0)': step "restart(n0)": nodes are numbered from n1`},
		{args: append(demo, "--schedule", ""), want: `--schedule '': no step in it; write steps such as "c1 c2 time c1" (see locklab scenarios)`},
		{args: []string{"demo", "release-after-expiry", "--mermaid"}, want: fmt.Sprintf("--mermaid writes one diagram, and release-after-expiry applies to %d strategies: choose one with --strategy (%s)",
			len(rae), strings.Join(rae, ", "))},
		{args: append(demo, "--mermaid", "--json"), want: "--json and --mermaid: choose one"},

		// explore
		{args: []string{"explore"}, want: "explore needs --strategy and --scenario (see locklab list, locklab scenarios)"},
		{args: []string{"explore", "-x", "stale-recovery"}, want: "explore needs --strategy (see locklab list)"},
		{args: []string{"explore", "-s", "setnx-del"}, want: "explore needs --scenario (see locklab scenarios)"},
		{args: []string{"explore", "-s", "nosuch", "-x", "stale-recovery"}, want: "-s nosuch: unknown strategy; the strategies are " + strats},
		{args: []string{"explore", "-s", "setnx-del", "--scenario", "nosuch"}, want: "--scenario nosuch: unknown scenario; the scenarios are " + scens},
		{args: []string{"explore", "-s", "setnx-del", "-x", "redlock-restart"}, want: "-s setnx-del: scenario redlock-restart does not apply to this strategy; it applies to redlock"},
		{args: append(explore, "--clients", "-1"), want: "--clients -1: must be a whole number from 1 to 16"},
		{args: []string{"explore", "-s", "etcd-lease", "-x", "pause-past-ttl", "--clients", "100000"}, want: "--clients 100000: must be a whole number from 1 to 16"},
		{args: append(explore, "--clients", "17"), want: "--clients 17: must be a whole number from 1 to 16"},
		{args: append(explore, "--clients", "2"), want: "--clients 2: stale-recovery on setnx-del has 3 clients (c1 to c3); more can be added, none removed"},
		{args: append(explore, "--depth", "-5"), want: "--depth -5: must be a whole number, 1 or more"},
		{args: append(explore, "--depth", "0"), want: "--depth 0: must be a whole number, 1 or more"},
		{args: append(explore, "--preemptions", "-7"), want: "--preemptions -7: must be a whole number, 0 or more (0: none)"},
		{args: append(explore, "--faults", "-1"), want: "--faults -1: must be a whole number, 0 or more (0: none; default: the scenario's bound)"},
		{args: append(explore, "--max-schedules", "0"), want: "--max-schedules 0: must be a whole number, 1 or more"},
		{args: append(explore, "--random", "-5"), want: "--random -5: must be a whole number, 1 or more"},
		{args: append(explore, "--workers", "-3"), want: "--workers -3: must be a whole number from 1 to 16"},
		{args: append(explore, "--workers", "17"), want: "--workers 17: must be a whole number from 1 to 16"},
		{args: append(explore, "--seed", "-1"), want: "--seed -1: must be a whole number from 0 to 18446744073709551615"},

		// matrix and report
		{args: []string{"matrix", "-s", "setnx-del,nosuch"}, want: "-s nosuch: unknown strategy; the strategies are " + strats},
		{args: []string{"matrix", "-x", "nosuch"}, want: "-x nosuch: unknown scenario; the scenarios are " + scens},
		{args: []string{"matrix", "--preemptions", "-1"}, want: "--preemptions -1: must be a whole number, 0 or more (0: none)"},
		{args: []string{"matrix", "--max-schedules", "0"}, want: "--max-schedules 0: must be a whole number, 1 or more"},
		{args: []string{"matrix", "--workers", "0"}, want: "--workers 0: must be a whole number from 1 to 16"},
		{args: []string{"matrix", "--parallel", "0"}, want: "--parallel 0: must be a whole number, 1 or more"},
		{args: []string{"matrix", "--nodes", "0"}, want: "--nodes 0: must be a whole number, 1 or more"},
		{args: []string{"matrix", "extra"}, want: "matrix takes no arguments, got 1: extra (see locklab matrix --help)"},
		{args: []string{"report", "-o", "/nonexistent/dir/r.html"}, want: "-o /nonexistent/dir/r.html: directory /nonexistent/dir does not exist"},
		{args: []string{"report", "--out", "/"}, want: "--out /: is a directory; name the HTML file to write in it"},
		{args: []string{"report", "-o", ""}, want: "-o '': must name the HTML file to write"},
		{args: []string{"report", "-s", "nosuch"}, want: "-s nosuch: unknown strategy; the strategies are " + strats},
		{args: []string{"report", "--workers", "17"}, want: "--workers 17: must be a whole number from 1 to 16"},

		// stress
		{args: []string{"stress"}, want: "stress needs --strategy (see locklab list)"},
		{args: []string{"stress", "-s", "nosuch"}, want: "-s nosuch: unknown strategy; the strategies are " + strats},
		{args: append(stress, "--clients", "0"), want: "--clients 0: must be a whole number, 1 or more"},
		{args: append(stress, "--clients", "-4"), want: "--clients -4: must be a whole number, 1 or more"},
		{args: append(stress, "--duration", "0"), want: "--duration 0: must be a duration more than 0, such as 100ms, 2s or 1m"},
		{args: append(stress, "--duration", "-1s"), want: "--duration -1s: must be a duration more than 0, such as 100ms, 2s or 1m"},
		{args: append(stress, "--cycles", "-1"), want: "--cycles -1: must be a whole number, 0 or more (0: no limit, run for --duration)"},
		{args: append(stress, "--ttl", "0"), want: "--ttl 0: must be a duration of at least 1ms, such as 100ms, 2s or 1m"},
		{args: append(stress, "--ttl", "-1s"), want: "--ttl -1s: must be a duration of at least 1ms, such as 100ms, 2s or 1m"},
		{args: append(stress, "--ttl", "500us"), want: "--ttl 500us: must be a duration of at least 1ms, such as 100ms, 2s or 1m"},
		{args: append(stress, "--pause-prob", "1.5"), want: "--pause-prob 1.5: must be a probability from 0 to 1 (0: never)"},
		{args: append(stress, "--pause-prob", "-0.5"), want: "--pause-prob -0.5: must be a probability from 0 to 1 (0: never)"},
		{args: append(stress, "--crash-prob", "NaN"), want: "--crash-prob NaN: must be a probability from 0 to 1 (0: never)"},
		{args: append(stress, "--skew", "-1s"), want: "--skew -1s: must be a duration, 0 or more (0: no skew), such as 100ms, 2s or 1m"},
		{args: append(stress, "--nodes", "0"), want: "--nodes 0: must be a whole number, 1 or more"},
		{args: append(stress, "--fault-every", "0"), want: "--fault-every 0: must be a duration more than 0, such as 100ms, 2s or 1m"},
		{args: append(stress, "--fault-for", "-1s"), want: "--fault-for -1s: must be a duration more than 0, such as 100ms, 2s or 1m"},
		{args: append(stress, "--node-faults", "pause,explode"), want: "--node-faults explode: unknown node fault; the node faults are pause,restart,restart-keep,partition, failover, cluster-failover, (on etcd or ZooKeeper) leader-kill or (on PostgreSQL) kill"},
		{args: append(stress, "--node-faults", "member-loss"), want: "--node-faults member-loss: a member's loss is a step of the scenarios' schedules (lag(nN), then wipe(nN): locklab explore -x member-loses-data), which stress mode does not inject; unknown node fault; the node faults are pause,restart,restart-keep,partition, failover, cluster-failover, (on etcd or ZooKeeper) leader-kill or (on PostgreSQL) kill"},
		{args: append(stress, "--node-faults", "leader-kill"), want: "--node-faults leader-kill strikes an etcd cluster's leader: it takes an etcd strategy (etcd-lease, etcd-mutex), or strikes a ZooKeeper ensemble's leader: it takes a ZooKeeper strategy (zk-ephemeral, zk-golib, zk-recipe)"},
		{args: append(stress, "--node-faults", "failover,pause"), want: "--node-faults failover runs on a Sentinel group and cannot be combined with pause"},
		{args: append(stress, "--node-faults", "kill"), want: "--node-faults kill kills a PostgreSQL server's client sessions: it takes a PostgreSQL strategy (pg-advisory, pg-for-update, pg-lock-table, pg-lock-table-sync)"},
		{args: append(stress, "--backend", "addrs", "--addr", "127.0.0.1:1", "--node-faults", "pause"),
			want: "--node-faults needs a backend that controls its servers (docker or process), not addrs"},
		{args: []string{"stress", "-s", "pg-for-update", "--fail-on-violation", "--node-faults", "pause,restart"},
			want: "--node-faults restart: a run on PostgreSQL injects pause,restart-keep,partition,kill,failover"},
		{args: []string{"stress", "-s", "pg-lock-table", "--addr", "127.0.0.1:1"},
			want: "strategy pg-lock-table locks on PostgreSQL, which the addrs backend does not give: use --backend process"},
		{args: []string{"stress", "-s", "etcd-lease", "--nodes", "7"},
			want: "--nodes 7: etcd-lease runs on a three-member etcd cluster; --nodes is the Redis nodes of a multi-node strategy (redlock)"},
		{args: append(stress, "--sentinel-refresh", "2s"),
			want: "--sentinel-refresh 2s: the clients ask Sentinels only on a Sentinel group, which --node-faults failover starts on a Redis strategy"},
		{args: append(stress, "--sentinel-refresh", "0s"), want: "--sentinel-refresh 0s: must be a duration more than 0, such as 100ms, 2s or 1m"},
		{args: append(stress, "--nodes", "3"), want: "--nodes 3: set-nx-px locks on one Redis node; --nodes is the Redis nodes of a multi-node strategy (redlock)"},
		{args: []string{"stress", "-s", "pg-advisory", "--nodes", "3"},
			want: "--nodes 3: pg-advisory runs on a PostgreSQL server; --nodes is the Redis nodes of a multi-node strategy (redlock)"},
		{args: []string{"stress", "-s", "etcd-lease", "--ttl", "1500ms"}, want: "--ttl 1.5s: etcd-lease's leases are etcd's, in whole seconds: give 1s, 2s, ..."},
		{args: append(stress, "--porcupine-html", "/nonexistent/dir/x.html"), want: "--porcupine-html /nonexistent/dir/x.html: directory /nonexistent/dir does not exist"},
		{args: append(stress, "--porcupine-html", ""), want: "--porcupine-html '': must name the HTML file to write"},

		// check
		{args: []string{"check", "--addr", "127.0.0.1:1", "--master-user", "alice"}, want: "--master-user alice: give the user's password with --master-password"},
		{args: []string{"check", "--addr", "h:1", "--addr", "redis://:Secret@h:2", "--addr", "h:3", "--addr", "h:4", "--addr", "h:5", "--addr", "h:6", "--addr", "h:7", "--addr", "h:8"},
			want: "check reads one server, and --addr gives 8: h:1 redis://:xxxxx@h:2 h:3 h:4 h:5 and 3 more"},
		{args: []string{"scenarios", "a", "b", "c", "d", "e", "f", "g", "h"}, want: "scenarios takes no arguments, got 8: a b c d e and 3 more (see locklab scenarios --help)"},

		// play
		{args: []string{"play", "nope"}, want: `unknown level "nope": valid levels are ...`},
		{args: []string{"play", "a", "b"}, want: "play takes at most one argument, got 2: a b (see locklab play --help)"},
		{args: []string{"play", "-s", "setnx-del"}, want: "-s names the strategy to play a scenario on: give the scenario too (locklab scenarios lists them)"},
		{args: []string{"play", "clock-skew", "-s", "nosuch"}, want: "-s nosuch: unknown strategy; the strategies are " + strats},
		{args: []string{"play", "redlock-pause", "-s", "setnx-del"}, want: "-s setnx-del: scenario redlock-pause does not apply to this strategy; it applies to redlock"},
		{args: []string{"play", "--max-sessions", "0"}, want: "--max-sessions 0: must be a whole number, 1 or more"},
		{args: []string{"play", "--idle", "0"}, want: "--idle 0: must be a duration more than 0, such as 100ms, 2s or 1m"},
		{args: []string{"play", "--http", "8080"}, want: "--http 8080: must be host:port, such as 127.0.0.1:8080 or 0.0.0.0:8080"},
		{args: []string{"play", "--http", busy.Addr().String()}, want: "--http " + busy.Addr().String() + ": bind: address already in use"},
		{args: []string{"play", "--docs-url", "docs"}, want: "--docs-url docs: must be a URL that ends in /, such as https://github.com/locklab/locklab/blob/main/docs/"},
		{args: []string{"play", "--backend", "addrs", "--addr", "127.0.0.1:1"},
			want: "play starts Redis servers of its own for every participant: use --backend process or docker, not addrs"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], c.args...)
			cmd.Env = append(os.Environ(), cliChildEnv+"=1", "LOCKLAB_BACKEND=process", "LOCKLAB_REDIS_SERVER="+fake, "TMPDIR="+t.TempDir())
			if c.env != "" {
				cmd.Env = append(cmd.Env, c.env)
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "exit status: %v; stderr %s", err, stderr.String())
			assert.Equal(t, 2, exit.ExitCode(), "exit status")
			assert.Empty(t, stdout.String(), "nothing on stdout")
			line, ok := strings.CutSuffix(stderr.String(), "\n")
			require.True(t, ok && !strings.Contains(line, "\n"), "one line on stderr, got %q", stderr.String())
			if prefix, cut := strings.CutSuffix(c.want, "..."); cut {
				assert.True(t, strings.HasPrefix(line, "locklab: "+prefix), "got  %s\nwant locklab: %s", line, c.want)
			} else {
				assert.Equal(t, "locklab: "+c.want, line)
			}
			_, err = os.Stat(fake + ".started")
			assert.True(t, os.IsNotExist(err), "a server was started before the refusal")
		})
	}
}

// TestRefusedAddrIsQuick: an --addr where nothing listens is told at once,
// not after the seconds a server that is starting would be given.
func TestRefusedAddrIsQuick(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	began := time.Now()
	var out, errb bytes.Buffer
	code := execute(t.Context(), []string{"race-demo", "--addr", addr}, &out, &errb)
	assert.Equal(t, 2, code)
	assert.Equal(t, "locklab: --addr "+addr+": connection refused: no server listens at "+addr+"\n", errb.String())
	assert.Less(t, time.Since(began), time.Second)
}
