package pgproc_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/procid"
	"github.com/locklab/locklab/internal/tooling/serverproc/proctest"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
)

func connect(t *testing.T, s *pgproc.Server) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func scalar[T any](t *testing.T, c *pgx.Conn, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, c.QueryRow(context.Background(), sql, args...).Scan(&v), sql)
	return v
}

// shmID reads the System V segment postmaster.pid names.
func shmID(t *testing.T, s *pgproc.Server) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.DataDir, "postmaster.pid"))
	require.NoError(t, err)
	f := strings.Fields(strings.Split(string(b), "\n")[6])
	require.Len(t, f, 2)
	id, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	return id
}

func shmExists(id int) bool {
	var d unix.SysvShmDesc
	_, err := unix.SysvShmCtl(id, unix.IPC_STAT, &d)
	return err == nil
}

// uidOf is the real uid of process pid.
func uidOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid, err := strconv.Atoi(strings.Fields(rest)[0])
			require.NoError(t, err)
			return uid
		}
	}
	t.Fatal("no Uid line")
	return -1
}

func TestStartSettingsClose(t *testing.T) {
	t.Parallel()
	began := time.Now()
	s := pgtest.Start(t, pgproc.Options{Settings: map[string]string{"application_name": "pgproc-test"}})
	t.Logf("%s started in %v on port %d", pgproc.Version(s.BinDir), time.Since(began).Round(time.Millisecond), s.Port)
	c := connect(t, s)
	for name, want := range map[string]string{
		"fsync": "off", "tcp_keepalives_idle": "2", "tcp_keepalives_interval": "1",
		"tcp_keepalives_count": "3", "tcp_user_timeout": "5000", "listen_addresses": "127.0.0.1",
		"unix_socket_directories": s.Dir, "application_name": "pgproc-test",
	} {
		assert.Equal(t, want, scalar[string](t, c, "SELECT current_setting($1)", name), name)
	}
	assert.Equal(t, int64(0), scalar[int64](t, c, "SELECT count(*) FROM pg_stat_ssl WHERE ssl"))
	if procid.ShmUsable() {
		assert.Equal(t, procid.ShmDir, filepath.Dir(s.Dir), "the server's directory is in memory where it can be")
	}
	if os.Geteuid() == 0 {
		assert.NotZero(t, uidOf(t, s.Pid()), "the postmaster must not run as root")
	} else {
		assert.Equal(t, os.Geteuid(), uidOf(t, s.Pid()), "a non-root process runs the server as itself")
	}
	// The unix socket in Dir works too.
	sc, err := pgx.Connect(context.Background(), s.SocketDSN())
	require.NoError(t, err)
	require.NoError(t, sc.Ping(context.Background()))
	sc.Close(context.Background())

	pm, id, dir := s.Pid(), shmID(t, s), s.Dir
	kids := s.Backends()
	require.NotEmpty(t, kids, "the postmaster's workers")
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "a second Close is harmless")
	for _, pid := range append(kids, pm) {
		assert.Error(t, unix.Kill(pid, 0), "process %d outlived Close", pid)
	}
	assert.NoDirExists(t, dir)
	assert.False(t, shmExists(id), "shared memory segment %d outlived Close", id)
}

// TestStartMany: servers whose data directories are copies of one
// initdb's are separate clusters, each on its port and directory, run by
// the same unprivileged user; a table made on one is not on the other.
func TestStartMany(t *testing.T) {
	t.Parallel()
	ss, err := pgproc.StartMany(context.Background(), 2, pgproc.Options{})
	require.NoError(t, err)
	for _, s := range ss {
		t.Cleanup(func() { s.Close() })
	}
	require.Len(t, ss, 2)
	a, b := ss[0], ss[1]
	assert.NotEqual(t, a.Port, b.Port)
	assert.NotEqual(t, a.Dir, b.Dir)
	ca, cb := connect(t, a), connect(t, b)
	assert.Equal(t, a.DataDir, scalar[string](t, ca, "SHOW data_directory"))
	assert.Equal(t, b.DataDir, scalar[string](t, cb, "SHOW data_directory"))
	assert.Equal(t, uidOf(t, a.Pid()), uidOf(t, b.Pid()), "both servers run as one user")
	_, err = ca.Exec(context.Background(), "CREATE TABLE only_on_a (k text)")
	require.NoError(t, err)
	assert.Equal(t, int64(1), scalar[int64](t, ca, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_on_a'"))
	assert.Equal(t, int64(0), scalar[int64](t, cb, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_on_a'"))

	dirs := []string{a.Dir, b.Dir}
	for _, s := range ss {
		require.NoError(t, s.Close())
	}
	for _, d := range dirs {
		assert.NoDirExists(t, d)
	}
	_, err = pgproc.StartMany(context.Background(), 2, pgproc.Options{Port: 5999})
	assert.Error(t, err, "two servers cannot share a port")
}

// TestKillPostmasterRestart: a crash ends every session and the advisory
// locks with it; committed rows survive the restart; a Close after a kill
// leaves no shared memory behind.
func TestKillPostmasterRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Start(t, pgproc.Options{})
	port := s.Port
	c := connect(t, s)
	_, err := c.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)")
	require.NoError(t, err)
	require.True(t, scalar[bool](t, c, "SELECT pg_try_advisory_lock(42)"))

	old := s.Exited()
	s.KillPostmaster()
	select {
	case <-old:
	default:
		t.Fatal("the postmaster still runs after KillPostmaster")
	}
	assert.Zero(t, s.Pid())
	assert.Error(t, c.Ping(ctx), "the session must be gone with its postmaster")

	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, s.Restart(rctx))
	assert.Equal(t, port, s.Port, "same port after restart")
	c2 := connect(t, s)
	assert.Equal(t, 7, scalar[int](t, c2, "SELECT v FROM kept"))
	assert.True(t, scalar[bool](t, c2, "SELECT pg_try_advisory_lock(42)"), "the crashed session's lock must be gone")

	id, dir := shmID(t, s), s.Dir
	s.KillPostmaster()
	assert.True(t, shmExists(id), "a killed postmaster leaves its segment (what Close must clean)")
	require.NoError(t, s.Close())
	assert.False(t, shmExists(id), "Close after a kill must remove the segment")
	assert.NoDirExists(t, dir)
}

// TestKillBackend: pg_terminate_backend ends one session, not the others.
func TestKillBackend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Start(t, pgproc.Options{})
	a, b := connect(t, s), connect(t, s)
	require.True(t, scalar[bool](t, a, "SELECT pg_try_advisory_lock(1)"))
	pid := int(a.PgConn().PID())
	require.NoError(t, s.KillBackend(ctx, pid))
	assert.Error(t, a.Ping(ctx), "the terminated session")
	assert.NoError(t, b.Ping(ctx), "another session goes on")
	assert.True(t, scalar[bool](t, b, "SELECT pg_try_advisory_lock(1)"), "the lock went with its session")
	assert.Error(t, s.KillBackend(ctx, pid), "no such backend any more")

	// A SIGKILLed backend takes every session down with it.
	c := connect(t, s)
	require.NoError(t, s.CrashBackend(ctx, int(c.PgConn().PID())))
	assert.Error(t, b.Ping(ctx), "crash recovery ends the other sessions too")
	d := connect(t, s)
	assert.True(t, scalar[bool](t, d, "SELECT pg_try_advisory_lock(1)"), "and their locks")
	assert.Error(t, s.CrashBackend(ctx, os.Getpid()), "only the postmaster's children")
}

// TestStopCont: a paused server answers nothing; resumed, the same
// session goes on.
func TestStopCont(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t, pgproc.Options{})
	c := connect(t, s)
	require.NoError(t, s.Stop())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := pgx.Connect(ctx, s.DSN())
	cancel()
	require.Error(t, err, "a paused server accepts no session")
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	began := time.Now()
	err = c.Ping(ctx)
	cancel()
	require.Error(t, err, "a paused server answers nothing")
	assert.Less(t, time.Since(began), 5*time.Second)
	require.NoError(t, s.Cont())
	c2 := connect(t, s)
	assert.Equal(t, 1, scalar[int](t, c2, "SELECT 1"))
}

// onBackends runs test as a parallel subtest on each backend, with the
// options of a primary there (a docker one labelled with the subtest's
// name); docker is skipped where no engine answers.
func onBackends(t *testing.T, test func(t *testing.T, opts pgproc.Options)) {
	for _, be := range []string{pgproc.BackendProcess, pgproc.BackendDocker} {
		t.Run(be, func(t *testing.T) {
			t.Parallel()
			opts := pgproc.Options{Backend: be}
			if be == pgproc.BackendDocker {
				if testing.Short() {
					t.Skip("containers of the PostgreSQL image: the full run's (CI, make test-long)")
				}
				if _, err := dockerbox.Connect(context.Background()); err != nil {
					t.Skipf("docker backend: %v", err)
				}
				opts.Label = t.Name()
			}
			test(t, opts)
		})
	}
}

// owned lists the containers and networks of the docker servers labelled
// label.
func owned(t *testing.T, label string) (containers, networks []string) {
	t.Helper()
	cs, ns, err := dockerbox.Owned(context.Background(), os.Getpid(), label)
	require.NoError(t, err)
	return cs, ns
}

// TestStandbyPromote: a standby streams the primary's rows and refuses
// writes; promoted after the primary dies, it takes writes and has the
// rows but not the primary's locks. On docker the standby is a container
// on the primary's network that streams from the primary's address.
func TestStandbyPromote(t *testing.T) {
	onBackends(t, testStandbyPromote)
}

func testStandbyPromote(t *testing.T, opts pgproc.Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := pgtest.Start(t, opts)
	pc := connect(t, p)
	_, err := pc.Exec(ctx, "CREATE TABLE r (v int); INSERT INTO r VALUES (1)")
	require.NoError(t, err)
	began := time.Now()
	sb := pgtest.StartStandby(t, p, pgproc.Options{})
	t.Logf("standby streaming %v after the call: %s", time.Since(began).Round(time.Millisecond), sb.Describe())
	assert.NotEqual(t, p.DSN(), sb.DSN())
	assert.Equal(t, p.Backend(), sb.Backend())
	ci := scalar[string](t, connect(t, sb), "SHOW primary_conninfo")
	assert.Contains(t, ci, "host="+p.Host+" ", "it streams from the primary's address")
	assert.Contains(t, ci, "port="+strconv.Itoa(p.Port)+" ")
	docker := opts.Backend == pgproc.BackendDocker
	if docker {
		cs, ns := owned(t, opts.Label)
		require.Len(t, ns, 1, "the standby is on the primary's network")
		assert.ElementsMatch(t, []string{"/" + ns[0] + "-pg", "/" + ns[0] + "-pg-standby1"}, cs)
		assert.Equal(t, 5432, sb.Port)
		assert.NotEqual(t, p.Host, sb.Host)
	}

	_, err = pc.Exec(ctx, "INSERT INTO r VALUES (2)")
	require.NoError(t, err)
	require.True(t, scalar[bool](t, pc, "SELECT pg_try_advisory_lock(9)"))
	// A row lock: a transaction left open on a session of its own.
	rl := connect(t, p)
	tx, err := rl.Begin(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, scalar[int](t, tx.Conn(), "SELECT v FROM r WHERE v = 1 FOR UPDATE"))
	_, err = connect(t, p).Exec(ctx, "SELECT v FROM r WHERE v = 1 FOR UPDATE NOWAIT")
	require.ErrorContains(t, err, "55P03", "the row is locked on the primary")
	require.NoError(t, sb.WaitReplayed(ctx, p))
	sc := connect(t, sb)
	assert.Equal(t, 2, scalar[int](t, sc, "SELECT count(*)::int FROM r"), "streamed rows")
	assert.True(t, scalar[bool](t, sc, "SELECT pg_is_in_recovery()"))
	_, err = sc.Exec(ctx, "INSERT INTO r VALUES (3)")
	require.Error(t, err, "a standby refuses writes")
	sc.Close(ctx)

	p.KillPostmaster()
	began = time.Now()
	require.NoError(t, sb.Promote(ctx))
	t.Logf("promoted in %v", time.Since(began).Round(time.Millisecond))
	pc2 := connect(t, sb)
	assert.False(t, scalar[bool](t, pc2, "SELECT pg_is_in_recovery()"))
	_, err = pc2.Exec(ctx, "INSERT INTO r VALUES (3)")
	require.NoError(t, err, "the promoted standby takes writes")
	assert.True(t, scalar[bool](t, pc2, "SELECT pg_try_advisory_lock(9)"), "the primary's lock is forgotten")
	_, err = pc2.Exec(ctx, "SELECT v FROM r WHERE v = 1 FOR UPDATE NOWAIT")
	assert.NoError(t, err, "the primary's row lock is forgotten")

	pc2.Close(ctx)
	require.NoError(t, sb.Close())
	if !docker {
		assert.NoDirExists(t, sb.Dir, "Close removes the standby's directory")
		assert.DirExists(t, p.Dir, "and not the primary's")
		return
	}
	cs, ns := owned(t, opts.Label)
	require.Len(t, ns, 1, "the primary's network stays")
	assert.Equal(t, []string{"/" + ns[0] + "-pg"}, cs, "Close removes the standby's container, not the primary's")
	require.NoError(t, p.Close())
	cs, ns = owned(t, opts.Label)
	assert.Empty(t, cs, "containers left")
	assert.Empty(t, ns, "networks left")
}

// TestStopStreaming: a standby cut off from its primary misses the
// primary's later commits, and promoted then, it has lost them; connected
// again, it catches up. A promoted standby outlives its primary's Close
// (on docker, their network stays until the last closes), and a standby
// of it streams from it.
func TestStopStreaming(t *testing.T) {
	onBackends(t, testStopStreaming)
}

func testStopStreaming(t *testing.T, opts pgproc.Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := pgtest.Start(t, opts)
	pc := connect(t, p)
	_, err := pc.Exec(ctx, "CREATE TABLE r (v int); INSERT INTO r VALUES (1)")
	require.NoError(t, err)
	sb := pgtest.StartStandby(t, p, pgproc.Options{})
	require.NoError(t, sb.WaitReplayed(ctx, p))

	began := time.Now()
	require.NoError(t, sb.StopStreaming(ctx))
	t.Logf("cut off in %v", time.Since(began).Round(time.Millisecond))
	_, err = pc.Exec(ctx, "INSERT INTO r VALUES (2)")
	require.NoError(t, err)
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	require.Error(t, sb.WaitReplayed(short, p), "a standby cut off receives nothing")
	sc := connect(t, sb)
	assert.Equal(t, 1, scalar[int](t, sc, "SELECT count(*)::int FROM r"))

	began = time.Now()
	require.NoError(t, sb.StartStreaming(ctx))
	require.NoError(t, sb.WaitReplayed(ctx, p))
	t.Logf("caught up in %v", time.Since(began).Round(time.Millisecond))
	assert.Equal(t, 2, scalar[int](t, sc, "SELECT count(*)::int FROM r"), "caught up")

	require.NoError(t, sb.StopStreaming(ctx))
	_, err = pc.Exec(ctx, "INSERT INTO r VALUES (3)")
	require.NoError(t, err)
	// A failover, as the PostgreSQL store's Node makes it: the primary killed, the
	// standby promoted, the primary closed.
	p.KillPostmaster()
	require.NoError(t, sb.Promote(ctx))
	pc.Close(ctx)
	require.NoError(t, p.Close())
	sc.Close(ctx)
	sc = connect(t, sb)
	assert.Equal(t, 2, scalar[int](t, sc, "SELECT count(*)::int FROM r"), "the commit made while cut off is lost")
	_, err = sc.Exec(ctx, "INSERT INTO r VALUES (4)")
	assert.NoError(t, err)

	sb2 := pgtest.StartStandby(t, sb, pgproc.Options{})
	require.NoError(t, sb2.WaitReplayed(ctx, sb))
	assert.Equal(t, 3, scalar[int](t, connect(t, sb2), "SELECT count(*)::int FROM r"), "the standby of the promoted server")
	if opts.Backend == pgproc.BackendDocker {
		cs, ns := owned(t, opts.Label)
		require.Len(t, ns, 1)
		assert.ElementsMatch(t, []string{"/" + ns[0] + "-pg-standby1", "/" + ns[0] + "-pg-standby2"}, cs)
	}
	require.NoError(t, sb2.Close())
	require.NoError(t, sb.Close())
	if opts.Backend == pgproc.BackendDocker {
		cs, ns := owned(t, opts.Label)
		assert.Empty(t, cs, "containers left")
		assert.Empty(t, ns, "networks left")
	}
}

// TestRemoveStale: directories of dead owners go, those of live ones stay.
func TestRemoveStale(t *testing.T) {
	tmp := os.TempDir()
	dead := filepath.Join(tmp, "locklab-pg-999999999-1-x")
	live := filepath.Join(tmp, "locklab-pg-"+strconv.Itoa(os.Getpid())+"-"+procid.Start(os.Getpid())+"-live")
	for _, d := range []string{dead, live} {
		require.NoError(t, os.MkdirAll(filepath.Join(d, "data"), 0o700))
	}
	t.Cleanup(func() { os.RemoveAll(live); os.RemoveAll(dead) })
	removed := pgproc.RemoveStale()
	assert.Contains(t, removed, dead)
	assert.NoDirExists(t, dead)
	assert.DirExists(t, live, "a live process's directory stays")
}

func TestBinDir(t *testing.T) {
	d, err := pgproc.BinDir()
	require.NoError(t, err, pgproc.InstallHint)
	assert.FileExists(t, filepath.Join(d, "initdb"))
	t.Setenv("LOCKLAB_PG_BINDIR", t.TempDir())
	_, err = pgproc.BinDir()
	assert.ErrorContains(t, err, "LOCKLAB_PG_BINDIR")
}

// BenchmarkStart measures a server's start (initdb, postgres, the first
// connection) and Close; target: under 2s on a 2-core machine.
func BenchmarkStart(b *testing.B) {
	for b.Loop() {
		s, err := pgproc.Start(context.Background(), pgproc.Options{})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// BenchmarkStandby measures pg_basebackup, the standby's start and the
// wait until it streams.
func BenchmarkStandby(b *testing.B) {
	p := pgtest.Start(b, pgproc.Options{})
	for b.Loop() {
		s, err := p.StartStandby(context.Background(), pgproc.Options{})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// TestPrivateTempDir: run by root under a TMPDIR that only root can enter
// (as t.TempDir makes them), the server, which runs as an unprivileged
// user, makes its directory in memory or /tmp instead, starts, and leaves
// nothing.
func TestPrivateTempDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the server runs as this process's user: any TMPDIR it can write works")
	}
	private := t.TempDir()
	require.NoError(t, os.Chmod(private, 0o700))
	t.Setenv("TMPDIR", private)
	s := pgtest.Start(t, pgproc.Options{})
	assert.Contains(t, []string{procid.ShmDir, "/tmp"}, filepath.Dir(s.Dir), "the directory of a server whose user cannot enter TMPDIR")
	assert.Equal(t, 1, scalar[int](t, connect(t, s), "SELECT 1"))
	require.NoError(t, s.Close())
	assert.NoDirExists(t, s.Dir)
}

const helperEnv = "LOCKLAB_PGPROC_HELPER"

// TestHelperServer is not a test: TestServerDiesWithParent runs it in a
// process of its own, which starts a server, prints its postmaster's pid
// and its directory, and waits to be killed.
func TestHelperServer(t *testing.T) {
	proctest.Helper(t, helperEnv, func() (int, string, error) {
		s, err := pgproc.Start(context.Background(), pgproc.Options{})
		if err != nil {
			return 0, "", err
		}
		return s.Pid(), s.Dir, nil
	})
}

// TestServerDiesWithParent: a process killed before it could close its
// server takes the postmaster with it (it runs as another user when the
// process is root), and RemoveStale removes its directory.
func TestServerDiesWithParent(t *testing.T) {
	proctest.DiesWithParent(t, "TestHelperServer", helperEnv, pgproc.RemoveStale)
}
