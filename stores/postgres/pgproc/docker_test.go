package pgproc_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/dockerbox/boxtest"
	"github.com/locklab/locklab/internal/tooling/tcpproxy"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
)

// TestDocker: a throwaway cluster in a container of its own network, made
// by initdb as an unprivileged user; the faults of the process backend
// (kill -9 of the postmaster and a restart that keeps the tables, a backend
// ended or killed, SIGSTOP and SIGCONT, a partition through a proxy) and a
// Close that leaves no container or network.
func TestDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("containers of the etcd or PostgreSQL images: the full run's (CI, make test-long)")
	}
	if _, err := dockerbox.Connect(context.Background()); err != nil {
		t.Skipf("docker backend: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	s := pgtest.Start(t, pgproc.Options{Backend: pgproc.BackendDocker, Label: t.Name()})
	t.Logf("PostgreSQL ready in %v: %s", time.Since(began).Round(time.Millisecond), s.Describe())
	assert.Equal(t, pgproc.BackendDocker, s.Backend())
	assert.Equal(t, 5432, s.Port)
	assert.NotEqual(t, "127.0.0.1", s.Host)
	cs, ns, err := dockerbox.Owned(ctx, os.Getpid(), t.Name())
	require.NoError(t, err)
	require.Len(t, ns, 1)
	assert.Regexp(t, `^locklab-\d+-[0-9a-f]{8}-postgres-TestDocker$`, ns[0])
	require.Equal(t, []string{"/" + ns[0] + "-pg"}, cs)

	c := connect(t, s)
	assert.Equal(t, "/data/pg", scalar[string](t, c, "SHOW data_directory"))
	assert.Equal(t, "off", scalar[string](t, c, "SHOW fsync"), "the settings of the process backend")
	_, err = c.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)")
	require.NoError(t, err)
	require.True(t, scalar[bool](t, c, "SELECT pg_try_advisory_lock(42)"))
	assert.NotEmpty(t, s.Backends())

	// kill -9 of the postmaster, then a restart on the same data.
	pm := s.Pid()
	require.NotZero(t, pm)
	s.KillPostmaster()
	assert.Zero(t, s.Pid())
	assert.Error(t, c.Ping(ctx), "the session must be gone with its postmaster")
	began = time.Now()
	require.NoError(t, s.Restart(ctx))
	t.Logf("restarted in %v", time.Since(began).Round(time.Millisecond))
	assert.Equal(t, 5432, s.Port)
	c2 := connect(t, s)
	assert.Equal(t, 7, scalar[int](t, c2, "SELECT v FROM kept"))
	assert.True(t, scalar[bool](t, c2, "SELECT pg_try_advisory_lock(42)"), "the crashed session's lock must be gone")

	// A backend ended, then one killed (crash recovery ends every session).
	a, b := connect(t, s), connect(t, s)
	require.True(t, scalar[bool](t, a, "SELECT pg_try_advisory_lock(1)"))
	require.NoError(t, s.KillBackend(ctx, int(a.PgConn().PID())))
	assert.Error(t, a.Ping(ctx))
	assert.NoError(t, b.Ping(ctx))
	d := connect(t, s)
	assert.Contains(t, s.Backends(), int(d.PgConn().PID()), "Backends names the container's pids")
	require.NoError(t, s.CrashBackend(ctx, int(d.PgConn().PID())))
	assert.Error(t, b.Ping(ctx), "crash recovery ends the other sessions too")
	assert.Error(t, s.CrashBackend(ctx, 1), "only the postmaster's children")

	// SIGSTOP: nothing answers; SIGCONT: the same session goes on.
	e := connect(t, s)
	require.NoError(t, s.Stop())
	pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = e.Ping(pctx)
	pcancel()
	require.Error(t, err, "a paused server answers nothing")
	require.NoError(t, s.Cont())
	assert.Equal(t, 1, scalar[int](t, connect(t, s), "SELECT 1"))

	// A partition through a proxy in front of the container's address.
	p, err := tcpproxy.New(net.JoinHostPort(s.Host, strconv.Itoa(s.Port)))
	require.NoError(t, err)
	defer p.Close()
	dsn := strings.Replace(s.DSN(), net.JoinHostPort(s.Host, "5432"), p.Addr(), 1)
	pc, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer pc.Close(context.Background())
	require.True(t, scalar[bool](t, pc, "SELECT pg_try_advisory_lock(7)"))
	p.Cut()
	pctx, pcancel = context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = pgx.Connect(pctx, dsn)
	pcancel()
	require.Error(t, err, "cut off")
	pctx, pcancel = context.WithTimeout(ctx, 300*time.Millisecond)
	err = pc.Ping(pctx)
	pcancel()
	require.Error(t, err, "the open session hears nothing")
	p.Heal()
	pc2, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err, "healed")
	assert.Equal(t, 1, scalar[int](t, pc2, "SELECT 1"))
	pc2.Close(ctx)

	require.NoError(t, s.Stop(), "Close removes a paused server too")
	began = time.Now()
	require.NoError(t, s.Close())
	t.Logf("closed in %v", time.Since(began).Round(time.Millisecond))
	require.NoError(t, s.Close(), "a second Close")
	cs, ns, err = dockerbox.Owned(ctx, os.Getpid(), t.Name())
	require.NoError(t, err)
	assert.Empty(t, cs, "containers left")
	assert.Empty(t, ns, "networks left")
}

const dockerHelperEnv = "LOCKLAB_PGPROC_DOCKER_HELPER"

// TestHelperDockerServer is not a test: TestDockerInterrupt runs it in a
// process of its own, which starts a docker server and a standby of it,
// says so, and waits for a signal.
func TestHelperDockerServer(t *testing.T) {
	boxtest.Helper(t, dockerHelperEnv, func() error {
		p, err := pgproc.Start(context.Background(), pgproc.Options{Backend: pgproc.BackendDocker})
		if err == nil {
			_, err = p.StartStandby(context.Background(), pgproc.Options{})
		}
		return err
	})
}

// TestDockerInterrupt: SIGINT to a process with a docker server and its
// standby open (a container each) removes their containers and network
// before the process ends.
func TestDockerInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("containers of the etcd or PostgreSQL images: the full run's (CI, make test-long)")
	}
	boxtest.Interrupt(t, "TestHelperDockerServer", dockerHelperEnv, 2, nil)
}

// BenchmarkStartDocker: initdb and the start of a server in a container
// (its image already built), until it accepts connections, and its Close.
func BenchmarkStartDocker(b *testing.B) {
	if _, err := dockerbox.Connect(context.Background()); err != nil {
		b.Skipf("docker backend: %v", err)
	}
	ctx := context.Background()
	for b.Loop() {
		s, err := pgproc.Start(ctx, pgproc.Options{Backend: pgproc.BackendDocker})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
