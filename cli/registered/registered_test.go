// Package registered_test runs locklab's commands, through package cli, on
// locks that a program of its own registers: one on Redis, written on the
// redigo connections the harness gives, the same with a connection of
// its own beside them (which the servers' audit must catch), and one on
// PostgreSQL, on the pgx pool it gives in Config.Store. They live in a package of their own so
// that cli's own tests, which count and run every registered strategy,
// never see them.
package registered_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/cli"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
)

// The names the locks are registered under.
const (
	redisLock = "own-get-then-del"
	pgLock    = "own-pg-get-then-del"
	// noStore is pgLock registered without OptStore.
	noStore = "own-pg-no-store"
	// asideLock is redisLock that PINGs the server through a connection
	// of its own before each release.
	asideLock = "own-ping-aside"
)

func init() {
	strategies.MustRegister(strategies.Description{Name: redisLock, Family: "own",
		Summary: "SET NX PX; the release GETs, compares, then DELs"},
		func(cfg locklab.Config) (locklab.Locker, error) { return getThenDel{cfg}, nil })
	strategies.MustRegister(strategies.Description{Name: pgLock, Family: "postgres",
		Summary: "a lock table's row; the release SELECTs, compares, then DELETEs",
		Options: []string{strategies.OptStore}},
		func(cfg locklab.Config) (locklab.Locker, error) {
			pool, ok := cfg.Store.(*pgxpool.Pool)
			if !ok {
				return nil, errors.New("Config.Store is not a *pgxpool.Pool")
			}
			return pgGetThenDel{cfg, pool}, nil
		})
	strategies.MustRegister(strategies.Description{Name: asideLock, Family: "own",
		Summary: "SET NX PX; the release PINGs through a connection of its own, GETs, compares, then DELs"},
		func(cfg locklab.Config) (locklab.Locker, error) { return pingAside{getThenDel{cfg}}, nil })
	strategies.MustRegister(strategies.Description{Name: noStore, Family: "postgres"},
		func(cfg locklab.Config) (locklab.Locker, error) { return nil, errors.New("never built") })
}

// token draws a lock token from the run's seeded source (crypto/rand
// where the Config has none, as in stress mode).
func token(cfg locklab.Config) (string, error) { return cfg.Tokens().Token() }

// getThenDel takes the key with SET NX PX and releases it with GET,
// compare, then DEL: the DEL may delete a successor's lock.
type getThenDel struct{ cfg locklab.Config }

func (l getThenDel) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	tok, err := token(l.cfg)
	if err != nil {
		return locklab.Lease{}, err
	}
	start := l.cfg.ClockOrDefault().Now()
	c, err := l.cfg.Pool.GetContext(ctx)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	_, err = redis.String(c.Do("SET", key, tok, "NX", "PX", ttl.Milliseconds()))
	if errors.Is(err, redis.ErrNil) {
		return locklab.Lease{}, locklab.ErrNotAcquired
	}
	if err != nil {
		return locklab.Lease{}, err
	}
	return locklab.Lease{Key: key, Token: tok, Until: start.Add(ttl)}, nil
}

func (l getThenDel) Release(ctx context.Context, lease locklab.Lease) error {
	c, err := l.cfg.Pool.GetContext(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := redis.String(c.Do("GET", lease.Key))
	if errors.Is(err, redis.ErrNil) || (err == nil && v != lease.Token) {
		return locklab.ErrNotHeld
	}
	if err != nil {
		return err
	}
	_, err = c.Do("DEL", lease.Key)
	return err
}

// pingAside is getThenDel whose release first asks the server its port
// through the connections it was given and checks that the server
// answers on a connection it dials itself: a client the harness never
// schedules, if one that changes nothing.
type pingAside struct{ getThenDel }

func (l pingAside) Release(ctx context.Context, lease locklab.Lease) error {
	c, err := l.cfg.Pool.GetContext(ctx)
	if err != nil {
		return err
	}
	port, err := redis.Strings(c.Do("CONFIG", "GET", "port"))
	c.Close()
	if err != nil {
		return err
	}
	own, err := redis.DialContext(ctx, "tcp", "127.0.0.1:"+port[1])
	if err != nil {
		return err
	}
	_, err = own.Do("PING")
	own.Close()
	if err != nil {
		return err
	}
	return l.getThenDel.Release(ctx, lease)
}

// pgGetThenDel is the same lock as a row of locklab_lock_table, the table
// where the harness reads who holds a key: an upsert that replaces only an
// expired row takes it; the release SELECTs the token, compares, then
// DELETEs the row.
type pgGetThenDel struct {
	cfg  locklab.Config
	pool *pgxpool.Pool
}

func (l pgGetThenDel) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	// Outside the schedule: the harness runs a CREATE TABLE as set-up.
	_, err := l.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS locklab_lock_table
		(key text PRIMARY KEY, token text NOT NULL, expires_at timestamptz NOT NULL)`)
	var pe *pgconn.PgError
	if err != nil && (!errors.As(err, &pe) || (pe.Code != "23505" && pe.Code != "42P07")) {
		return locklab.Lease{}, err
	}
	tok, err := token(l.cfg)
	if err != nil {
		return locklab.Lease{}, err
	}
	now := l.cfg.ClockOrDefault().Now()
	tag, err := l.pool.Exec(ctx, `INSERT INTO locklab_lock_table (key, token, expires_at) VALUES ($1, $2, $3)
ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token, expires_at = EXCLUDED.expires_at
WHERE locklab_lock_table.expires_at < $4`, key, tok, now.Add(ttl), now)
	if err != nil {
		return locklab.Lease{}, err
	}
	if tag.RowsAffected() == 0 {
		return locklab.Lease{}, locklab.ErrNotAcquired
	}
	return locklab.Lease{Key: key, Token: tok, Until: now.Add(ttl)}, nil
}

func (l pgGetThenDel) Release(ctx context.Context, lease locklab.Lease) error {
	var held string
	err := l.pool.QueryRow(ctx, `SELECT token FROM locklab_lock_table WHERE key = $1`, lease.Key).Scan(&held)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && held != lease.Token) {
		return locklab.ErrNotHeld
	}
	if err != nil {
		return err
	}
	_, err = l.pool.Exec(ctx, `DELETE FROM locklab_lock_table WHERE key = $1`, lease.Key)
	return err
}

// run runs the command line args through cli.Run and returns its status,
// stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := cli.Run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// nestedChild makes the test binary run nestedRoot's command line: the
// worker processes of a stress run under it are this binary.
const nestedChild = "LOCKLAB_NESTED_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(nestedChild) != "" {
		root := nestedRoot()
		root.SetArgs(os.Args[1:])
		if err := root.Execute(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Setenv(nestedChild, "1") // for the processes the tests start
	os.Exit(m.Run())
}

// nestedRoot is a program's own root with locklab's commands under it, as
// "locklab".
func nestedRoot() *cobra.Command {
	root := &cobra.Command{Use: "myprog", SilenceUsage: true}
	root.AddCommand(cli.Command())
	return root
}

// TestNestedStressProcesses: under a program's own root, stress
// --processes runs each client as the program's "locklab worker", the
// lock registered there too.
func TestNestedStressProcesses(t *testing.T) {
	t.Parallel()
	var out, errb syncBuffer
	root := nestedRoot()
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs([]string{"locklab", "stress", "--backend", "process", "-s", redisLock, "--processes", "--clients", "2",
		"--cycles", "4", "--duration", "2m", "--json"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, root.ExecuteContext(ctx), errb.String())
	var rep struct {
		Strategy string `json:"strategy"`
		Cycles   int    `json:"cycles"`
	}
	require.NoError(t, json.Unmarshal([]byte(out.String()), &rep), out.String())
	assert.Equal(t, redisLock, rep.Strategy)
	assert.Positive(t, rep.Cycles, "the worker processes ran the lock")
}

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// post posts body to url and decodes the answer into v.
func post(t *testing.T, url, body string, v any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

// TestList: list shows both locks, with the family each was registered
// with, beside the built-in strategies.
func TestList(t *testing.T) {
	code, out, errOut := run(t, "list")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^`+redisLock+` +own +- +SET NX PX`, out)
	assert.Regexp(t, `(?m)^`+pgLock+` +postgres +- +a lock table's row`, out)
	assert.Regexp(t, `(?m)^setnx-del `, out, "the built-in strategies are listed too")
}

// TestRedisLock runs explore, demo, matrix, report and play on the Redis lock, on
// redis-server processes: each finds its release deleting the next
// holder's lock.
func TestRedisLock(t *testing.T) {
	t.Parallel()
	t.Run("explore", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := run(t, "explore", "--backend", "process", "--strategy", redisLock, "--scenario", "release-after-expiry")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "release-after-expiry on "+redisLock)
		assert.Contains(t, out, "VIOLATED (release)")
		assert.Contains(t, out, "shortest counterexample")
		assert.Contains(t, out, "deleted c2's lock")

		code, _, errOut = run(t, "explore", "--backend", "process", "--strategy", redisLock, "--scenario", "release-after-expiry",
			"--first", "--fail-on-violation")
		assert.Equal(t, 1, code, "--fail-on-violation: status 1 for the violation found")
		assert.Contains(t, errOut, "locklab: ")
	})
	t.Run("demo", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := run(t, "demo", "release-after-expiry", "--backend", "process", "-s", redisLock)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "release-after-expiry on "+redisLock)
		assert.Contains(t, out, "SET K c1's NX PX 30000")
		assert.Contains(t, out, "verdict: VIOLATED")
	})
	t.Run("matrix", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := run(t, "matrix", "--backend", "process", "-s", redisLock, "-x", "release-after-expiry,stale-recovery")
		require.Equal(t, 0, code, errOut)
		assert.Regexp(t, `(?m)^`+redisLock+` +VIOL +safe$`, out, "SET NX PX recovers a crashed holder's lock safely")
		assert.Contains(t, out, redisLock+" × release-after-expiry: VIOLATED (release)")
	})
	t.Run("report", func(t *testing.T) {
		t.Parallel()
		page := filepath.Join(t.TempDir(), "report.html")
		args := []string{"report", "--backend", "process", "-s", redisLock, "-x", "release-after-expiry", "-o", page}
		code, _, errOut := run(t, args...)
		require.Equal(t, 0, code, errOut)
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		assert.Contains(t, string(b), redisLock)
		assert.Contains(t, string(b), "locklab "+strings.Join(args, " "), "the page quotes the command line Run was given")
	})
	t.Run("play", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var out, errb syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- cli.Run(ctx, []string{"play", "--backend", "process", "--http", "127.0.0.1:0",
				"release-after-expiry", "-s", redisLock}, &out, &errb)
		}()
		re := regexp.MustCompile(`open (http://\S+)`)
		var url string
		require.Eventually(t, func() bool {
			m := re.FindStringSubmatch(out.String())
			if m != nil {
				url = m[1]
			}
			return m != nil
		}, 10*time.Second, 10*time.Millisecond, "play printed no address: %s %s", out.String(), errb.String())
		const level = "release-after-expiry/" + redisLock
		require.True(t, strings.HasSuffix(url, "/#"+level), url)
		base := strings.TrimSuffix(url, "#"+level)
		var r struct {
			Session string `json:"session"`
			Seq     int    `json:"seq"`
		}
		post(t, base+"api/sessions", `{"level":"`+level+`"}`, &r)
		post(t, base+"api/step", `{"session":"`+r.Session+`","seq":0,"step":"c1"}`, &r)
		assert.Equal(t, 1, r.Seq, "the lock's first command ran")
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, 0, code, errb.String())
		case <-time.After(30 * time.Second):
			t.Fatal("play did not stop")
		}
	})
}

// TestPostgresLock runs explore and matrix on the PostgreSQL lock, on a
// throwaway PostgreSQL server: its factory gets the harness's pgx pool,
// and the same break is found.
func TestPostgresLock(t *testing.T) {
	t.Parallel()
	t.Run("explore", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := run(t, "explore", "--backend", "process", "-s", pgLock, "-x", "release-after-expiry")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "release-after-expiry on "+pgLock)
		assert.Contains(t, out, "INSERT lock_table K")
		assert.Contains(t, out, "VIOLATED (release)")
	})
	t.Run("matrix", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := run(t, "matrix", "--backend", "process", "-s", pgLock, "-x", "release-after-expiry")
		require.Equal(t, 0, code, errOut)
		assert.Regexp(t, `(?m)^`+pgLock+` +VIOL$`, out)
		assert.Contains(t, out, pgLock+" × release-after-expiry: VIOLATED (release)")
	})
}

// TestHiddenClient: explore, matrix and demo fail, naming the server and what
// it counted, on a lock that talks to the servers they started through a
// client of its own; TestRedisLock passes the same lock without it.
func TestHiddenClient(t *testing.T) {
	t.Parallel()
	said := `n\d \(127\.0\.0\.1:\d+\) accepted \d+ connection\(s\) the harness did not open`
	for _, args := range [][]string{
		{"explore", "-x", "release-after-expiry"},
		{"matrix", "-x", "release-after-expiry"},
		{"demo", "release-after-expiry"},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, append(args, "--backend", "process", "-s", asideLock)...)
			assert.Equal(t, 2, code, errOut)
			assert.Contains(t, out, "VIOL", "the verdicts are printed, then the audit fails them")
			assert.Contains(t, errOut, "locklab: the servers' audit: "+asideLock+" talked to its servers through a client of its own")
			assert.Regexp(t, said, errOut)
		})
	}
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := run(t, "explore", "--backend", "process", "-s", asideLock, "-x", "release-after-expiry", "--json")
		assert.Equal(t, 2, code, errOut)
		var res struct {
			Audit struct {
				Ran    bool     `json:"ran"`
				Hidden []string `json:"hidden"`
			} `json:"audit"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &res), out)
		assert.True(t, res.Audit.Ran)
		require.Len(t, res.Audit.Hidden, 1)
		assert.Regexp(t, said, res.Audit.Hidden[0])
	})
	// On a server the user runs, whose other clients would count, the
	// command only reads: no audit, and the run passes.
	t.Run("addr", func(t *testing.T) {
		t.Parallel()
		s := redistest.StartOne(t)
		code, out, errOut := run(t, "explore", "--addr", s.Addr, "-s", asideLock, "-x", "release-after-expiry", "--json")
		require.Equal(t, 0, code, errOut)
		var res struct {
			Audit map[string]any `json:"audit"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &res), out)
		assert.Equal(t, map[string]any{"ran": false}, res.Audit)
	})
}

// TestErrors: the refusals name the locks as they name the built-in
// strategies, before any server starts.
func TestErrors(t *testing.T) {
	code, _, errOut := run(t, "explore", "-s", redisLock+"x", "-x", "release-after-expiry")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "locklab: -s "+redisLock+"x: unknown strategy; the strategies are ")
	assert.Contains(t, errOut, ", "+redisLock+",", "the strategies listed include the lock")
	assert.Contains(t, errOut, ", "+pgLock+",")
	assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line")

	code, _, errOut = run(t, "demo", "redlock-pause", "-s", redisLock)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-s "+redisLock+": scenario redlock-pause does not apply to this strategy")

	for _, args := range [][]string{
		{"explore", "--backend", "process", "-s", noStore, "-x", "release-after-expiry"},
		{"matrix", "--backend", "process", "-s", noStore},
		{"demo", "release-after-expiry", "--backend", "process", "-s", noStore},
	} {
		code, out, errOut := run(t, args...)
		assert.Equal(t, 2, code, "%s", args)
		assert.Empty(t, out, "%s: refused before any server starts", args)
		assert.Equal(t, "locklab: -s "+noStore+": a lock of the postgres family runs on PostgreSQL and takes its client from Config.Store, "+
			"which only a strategy whose Description lists strategies.OptStore in its Options is given\n", errOut, "%s", args)
	}
}
