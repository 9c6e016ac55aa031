package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/deploy"
	"github.com/locklab/locklab/internal/tooling/redistest"
)

// runStatus runs the CLI as main does and returns its exit status, stdout
// and stderr.
func runStatus(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// recorded is how many strategies of the recorded matrix have a cell on
// scenario.
func recorded(t *testing.T, scenario string) int {
	t.Helper()
	m := deploy.Verdicts()
	n := 0
	for _, name := range m.Strategies {
		if _, ok := m.Cell(name, scenario); ok {
			n++
		}
	}
	require.NotZero(t, n, scenario)
	return n
}

// TestCheck: on redis-server as locklab starts it (no persistence), check
// reports the restart exposure with its replays and the checks that pass,
// exit status 0; every replay it prints, run as printed, replays a
// violation of the cell it names.
func TestCheck(t *testing.T) {
	s := redistest.StartOne(t)
	code, out, stderr := runStatus(t, "check", "--addr", s.Addr)
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
	lines := strings.Split(out, "\n")
	assert.Regexp(t, `^redis://`+regexp.QuoteMeta(s.Addr)+`: Redis 7\.\S+, standalone master, no replica$`, lines[0])
	for _, want := range []string{
		"EXPOSED  persistence   appendonly no and no snapshots",
		fmt.Sprintf("restart-loses-lock: fails on all %d strategies", recorded(t, "restart-loses-lock")),
		"ok       eviction      maxmemory-policy noeviction",
		"ok       failover      master without replicas",
		"ok       cluster       cluster mode off",
		"ok       clock ",
		"ok       rtt           median round trip",
	} {
		assert.Contains(t, out, want)
	}
	var replays []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "locklab demo ") {
			replays = append(replays, l)
		}
	}
	require.Len(t, replays, 2, "one per exposed scenario: restart-loses-lock, redlock-restart\n%s", out)
	for _, r := range replays {
		replay(t, r)
	}
}

// replay runs a replay command line as check prints it, on servers the
// process backend starts, and checks that it shows the violation.
func replay(t *testing.T, line string) {
	t.Helper()
	args := shellSplit(t, line)
	require.Equal(t, []string{"locklab", "demo"}, args[:2], line)
	out, stderr, err := run(t, append(args[1:], "--backend", "process")...)
	require.NoError(t, err, "%s\n%s", line, stderr)
	assert.Contains(t, out, "verdict: VIOLATED", line)
	i := strings.Index(line, "--schedule '")
	require.Positive(t, i, line)
	sched := strings.TrimSuffix(line[i+len("--schedule '"):], "'")
	assert.Contains(t, out, "schedule: "+sched, "%s ran another schedule", line)
}

// shellSplit splits a command line as a POSIX shell does, for the words
// and single quotes that check prints.
func shellSplit(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	in, word := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			in, word = !in, true
		case r == ' ' && !in:
			if word {
				out = append(out, cur.String())
				cur.Reset()
				word = false
			}
		default:
			cur.WriteRune(r)
			word = true
		}
	}
	require.False(t, in, "unterminated quote in %s", s)
	if word {
		out = append(out, cur.String())
	}
	return out
}

// TestCheckReplaysEveryCell: the replay of every failing cell the report
// lists for the exposures a deployment can show (the JSON lists them all)
// replays a violation. -short runs those of a replica's failover only.
func TestCheckReplaysEveryCell(t *testing.T) {
	t.Parallel()
	m := redistest.StartOne(t)
	redistest.StartReplica(t, m)
	code, out, stderr := runStatus(t, "check", "--addr", m.Addr, "--json")
	require.Equal(t, 0, code, stderr)
	var rep deploy.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	seen := map[string]bool{}
	for _, e := range rep.Exposures {
		if testing.Short() && e.Check != deploy.CheckFailover {
			continue
		}
		for _, f := range e.Failing {
			if f.Replay == "" || seen[f.Replay] {
				continue
			}
			seen[f.Replay] = true
			replay(t, f.Replay)
		}
	}
	require.NotEmpty(t, seen)
	t.Logf("%d cells replayed", len(seen))
}

// TestCheckJSON: --json prints the report alone on stdout, in the shape
// of deploy.Report; -s narrows its lists.
func TestCheckJSON(t *testing.T) {
	s := redistest.StartOne(t)
	code, out, stderr := runStatus(t, "check", "--addr", s.Addr, "--json", "-s", "set-nx-px,redlock", "--ttl", "1s", "--pings", "3")
	require.Equal(t, 0, code, stderr)
	var raw struct {
		Target   string `json:"target"`
		Version  string `json:"version"`
		Mode     string `json:"mode"`
		Role     string `json:"role"`
		Replicas int    `json:"replicas"`
		RTT      struct {
			Median      int64   `json:"median_ns"`
			Samples     []int64 `json:"samples_ns"`
			NodeTimeout int64   `json:"node_timeout_ns"`
			TTL         int64   `json:"ttl_ns"`
		} `json:"rtt"`
		Clock struct {
			Offset      *int64 `json:"offset_ns"`
			Uncertainty int64  `json:"uncertainty_ns"`
			MaxSkew     int64  `json:"max_skew_ns"`
		} `json:"clock"`
		Exposures []struct {
			Check     string              `json:"check"`
			Status    string              `json:"status"`
			Finding   string              `json:"finding"`
			Settings  map[string]string   `json:"settings"`
			Scenarios []string            `json:"scenarios"`
			Failing   []map[string]string `json:"failing"`
			Safe      []string            `json:"safe"`
		} `json:"exposures"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&raw), out)
	assert.Equal(t, "redis://"+s.Addr, raw.Target)
	assert.Equal(t, "standalone", raw.Mode)
	assert.Equal(t, "master", raw.Role)
	assert.Len(t, raw.RTT.Samples, 3)
	assert.EqualValues(t, 20e6, raw.RTT.NodeTimeout, "a fiftieth of --ttl 1s")
	assert.EqualValues(t, 1e9, raw.RTT.TTL)
	assert.NotNil(t, raw.Clock.Offset)
	assert.EqualValues(t, 100e6, raw.Clock.MaxSkew)
	var checks []string
	for _, e := range raw.Exposures {
		checks = append(checks, e.Check)
		assert.Contains(t, []string{"exposed", "not-exposed", "unknown"}, e.Status)
		assert.NotNil(t, e.Scenarios, "scenarios is a list, empty where none")
		assert.NotNil(t, e.Safe, "safe is a list, empty where none")
		for _, f := range e.Failing {
			assert.Contains(t, []string{"set-nx-px", "redlock"}, f["strategy"], "-s narrows the lists")
		}
		if e.Check == "persistence" {
			assert.Equal(t, "exposed", e.Status)
			assert.Equal(t, map[string]string{"appendonly": "no", "save": ""}, e.Settings)
			require.Len(t, e.Failing, 3)
			assert.Equal(t, map[string]string{"strategy": "set-nx-px", "scenario": "restart-loses-lock", "outcome": "VIOLATED",
				"property": "mutual-exclusion", "schedule": "c1 c1 restart(n1) c2",
				"replay": "locklab demo restart-loses-lock -s set-nx-px --schedule 'c1 c1 restart(n1) c2'"}, e.Failing[0])
		}
	}
	assert.Equal(t, deploy.Checks, checks)
}

// TestCheckBadCommandLines: a bad flag or --addr is one line on stderr and
// exit status 2, before anything is dialled; a server that cannot be
// reached is one line and exit status 2 too.
func TestCheckBadCommandLines(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		args []string
		want string // the line after "locklab: "; a prefix when it ends in "..."
	}{
		{[]string{"check"}, "check needs --addr: the server to read, host:port, password@host:port or a URL redis://[user:password@]host:port[/db] (rediss:// for TLS)"},
		{[]string{"check", "--addr", "a:1", "--addr", "s3cret@b:2"}, "check reads one server, and --addr gives 2: a:1 xxxxx@b:2"},
		{[]string{"check", "--addr", ""}, "--addr '': must be host:port, password@host:port or a URL redis://[user:password@]host:port[/db] (rediss:// for TLS)"},
		{[]string{"check", "--addr", "secret@host:x"}, `--addr xxxxx@host:x: port "x" is not a number in 1..65535`},
		{[]string{"check", "--addr", "redis://u:pw@h:1/x"}, `--addr redis://u:xxxxx@h:1/x: database "x" is not a number`},
		{[]string{"check", "--addr", closed, "--max-skew", "0"}, "--max-skew 0: must be a duration more than 0, such as 100ms, 2s or 1m"},
		{[]string{"check", "--addr", closed, "--ttl", "10us"}, "--ttl 10us: must be a duration of at least 1ms, such as 100ms, 2s or 1m"},
		{[]string{"check", "--addr", closed, "--pings", "0"}, "--pings 0: must be a whole number from 1 to 1000"},
		{[]string{"check", "--addr", closed, "-s", "nosuch"}, "-s nosuch: unknown strategy; the strategies are ..."},
		{[]string{"check", "--addr", closed, "--backend", "process"}, "check reads the server given with --addr and starts none: --backend does not apply"},
		{[]string{"check", "--addr", closed, "extra"}, "check takes no arguments, got 1: extra (see locklab check --help)"},
		{[]string{"check", "--addr", closed}, "--addr redis://" + closed + ": server unreachable or failed: dial tcp " + closed + ": connect: connection refused"},
	} {
		code, out, stderr := runStatus(t, tc.args...)
		assert.Equal(t, 2, code, "%q", tc.args)
		assert.Empty(t, out, "%q", tc.args)
		line, ok := strings.CutPrefix(strings.TrimSuffix(stderr, "\n"), "locklab: ")
		require.True(t, ok, "%q: %q", tc.args, stderr)
		assert.NotContains(t, line, "\n", "%q: one line", tc.args)
		if p, ok := strings.CutSuffix(tc.want, "..."); ok {
			assert.True(t, strings.HasPrefix(line, p), "%q:\n got %s\nwant %s", tc.args, line, tc.want)
		} else {
			assert.Equal(t, tc.want, line, "%q", tc.args)
		}
	}
}

// TestCheckURLs: --addr takes the URLs of the other commands: an ACL user
// and a database, a password alone (redis-cli's form and password@),
// rediss:// (in a process of its own, which trusts the test's CA through
// SSL_CERT_FILE); a wrong password is an error, exit status 2.
func TestCheckURLs(t *testing.T) {
	s := redistest.StartTLS(t)
	s.ACLUser(t, "alice", "s3cret")
	for _, url := range []string{"redis://alice:s3cret@" + s.Addr + "/2", "rediss://alice:s3cret@" + s.TLSAddr + "/3"} {
		cmd := exec.Command(os.Args[0], "check", "--addr", url)
		cmd.Env = append(os.Environ(), cliChildEnv+"=1", "SSL_CERT_FILE="+s.CAFile)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s\n%s", url, out)
		assert.Contains(t, string(out), "EXPOSED  persistence")
		assert.NotContains(t, string(out), "s3cret")
	}
	cmd := exec.Command(os.Args[0], "check", "--addr", "rediss://"+s.TLSAddr)
	cmd.Env = append(os.Environ(), cliChildEnv+"=1", "SSL_CERT_FILE="+filepath.Join(t.TempDir(), "none.pem"))
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, 2, cmd.ProcessState.ExitCode())
	assert.Contains(t, string(out), "certificate")

	s.Do(t, "CONFIG", "SET", "requirepass", "pw")
	for _, addr := range []string{"pw@" + s.Addr, "redis://pw@" + s.Addr, "redis://:pw@" + s.Addr + "/1"} {
		code, out, stderr := runStatus(t, "check", "--addr", addr)
		assert.Equal(t, 0, code, "%s: %s", addr, stderr)
		assert.Contains(t, out, "EXPOSED  persistence")
	}
	code, _, stderr := runStatus(t, "check", "--addr", "wrong@"+s.Addr)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "WRONGPASS")
	assert.NotContains(t, stderr, "wrong@")
}

// TestCheckSentinel: --addr at a Sentinel reads the master it watches;
// --master-name must name one it watches.
func TestCheckSentinel(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroup(t, "locks")
	code, out, stderr := runStatus(t, "check", "--addr", g.Sentinels[0].Addr)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "a Sentinel watching 1 master (locks); master locks at "+g.Master.Addr)
	assert.Contains(t, out, "EXPOSED  failover      3 Sentinels watch master locks")
	assert.Contains(t, out, fmt.Sprintf("failover-loses-lock: fails on all %d strategies but set-nx-px-wait, safe there", recorded(t, "failover-loses-lock")))

	sentinel := "redis://" + g.Sentinels[0].Addr
	code, _, stderr = runStatus(t, "check", "--addr", sentinel, "--master-name", "other")
	assert.Equal(t, 2, code)
	assert.Equal(t, "locklab: --addr "+sentinel+`: the Sentinel watches no master named "other"; it watches locks`+"\n", stderr)

	// A Sentinel that watches two masters needs to be told which.
	other := redistest.StartOne(t)
	g.Sentinels[0].Do(t, "SENTINEL", "MONITOR", "other", "127.0.0.1", other.Port, 1)
	code, _, stderr = runStatus(t, "check", "--addr", sentinel)
	assert.Equal(t, 2, code)
	assert.Equal(t, "locklab: --addr "+sentinel+": the Sentinel watches 2 masters (locks, other): name the one to check with --master-name\n", stderr)
	code, out, stderr = runStatus(t, "check", "--addr", sentinel, "--master-name", "other")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "a Sentinel watching 2 masters (locks, other); master other at "+other.Addr)
	assert.Contains(t, out, "ok       failover      Sentinel watches master other at "+other.Addr+", which has no replica to promote")
}

// TestCheckSentinelAuth: a Sentinel and the master it watches may have
// passwords of their own (sentinel auth-pass); --master-password (and
// --master-user) log in to the master while --addr's password reaches the
// Sentinel alone. The flags are refused on a server that is not a
// Sentinel, and no password reaches the output.
func TestCheckSentinelAuth(t *testing.T) {
	t.Parallel()
	const masterPW, sentinelPW = "Mq9/master#Pw", "Sx4/sentinel?Pw"
	g := redistest.StartSentinelGroup(t, "locks")
	// The Sentinels learn the password before the servers require it,
	// lest they find the master down and fail it over.
	for _, s := range g.Sentinels {
		s.Do(t, "SENTINEL", "SET", "locks", "auth-pass", masterPW)
	}
	for _, r := range g.Replicas {
		r.Do(t, "CONFIG", "SET", "masterauth", masterPW)
		r.Do(t, "CONFIG", "SET", "requirepass", masterPW)
	}
	g.Master.Do(t, "ACL", "SETUSER", "alice", "on", ">"+masterPW+"-alice", "~*", "&*", "+@all")
	g.Master.Do(t, "CONFIG", "SET", "requirepass", masterPW)
	g.Sentinels[0].Do(t, "ACL", "SETUSER", "default", "resetpass", ">"+sentinelPW)
	open := "redis://" + g.Sentinels[1].Addr         // a Sentinel without a password
	enc := url.UserPassword("", sentinelPW).String() // ":Sx4%2Fsentinel%3FPw"
	noLeak := func(t *testing.T, text string) {
		t.Helper()
		for _, pw := range []string{masterPW, sentinelPW, "master#", "sentinel?", url.QueryEscape(masterPW), url.QueryEscape(sentinelPW)} {
			assert.NotContains(t, text, pw)
		}
	}

	// The URL's password alone reaches both: the open Sentinel refuses it,
	// the master refuses the locked Sentinel's.
	code, out, stderr := runStatus(t, "check", "--addr", "redis://:"+masterPW+"@"+g.Sentinels[1].Addr)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, stderr, "AUTH")
	noLeak(t, out+stderr)
	code, out, stderr = runStatus(t, "check", "--addr", "redis://"+enc+"@"+g.Sentinels[0].Addr)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, stderr, "the master locks at "+g.Master.Addr)
	noLeak(t, out+stderr)
	code, out, stderr = runStatus(t, "check", "--addr", open)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, stderr, "NOAUTH")

	// Given apart, each reaches its own server.
	for _, args := range [][]string{
		{"--addr", open, "--master-password", masterPW},
		{"--addr", "redis://" + enc + "@" + g.Sentinels[0].Addr, "--master-password", masterPW},
		{"--addr", open, "--master-user", "alice", "--master-password", masterPW + "-alice"},
	} {
		code, out, stderr = runStatus(t, append([]string{"check"}, args...)...)
		require.Equal(t, 0, code, "%s: %s", args, stderr)
		assert.Contains(t, out, "a Sentinel watching 1 master (locks); master locks at "+g.Master.Addr)
		assert.Contains(t, out, "EXPOSED  failover      3 Sentinels watch master locks")
		assert.Contains(t, out, "ok       eviction")
		noLeak(t, out+stderr)
	}

	// The flags that name or log in to a Sentinel's master are refused
	// where there is none.
	master := "redis://:xxxxx@" + g.Master.Addr
	code, out, stderr = runStatus(t, "check", "--addr", "redis://"+url.UserPassword("", masterPW).String()+"@"+g.Master.Addr, "--master-name", "locks")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Equal(t, "locklab: --master-name locks: --addr "+master+" is not a Sentinel but a standalone server, which has no master to name or log in to; --master-name is for a Sentinel only\n", stderr)
	code, _, stderr = runStatus(t, "check", "--addr", "redis://"+url.UserPassword("", masterPW).String()+"@"+g.Master.Addr, "--master-user", "alice", "--master-password", masterPW)
	assert.Equal(t, 2, code)
	assert.Equal(t, "locklab: --master-user alice, --master-password: --addr "+master+" is not a Sentinel but a standalone server, which has no master to name or log in to; --master-user, --master-password are for a Sentinel only\n", stderr)
	noLeak(t, stderr)
	code, _, stderr = runStatus(t, "check", "--addr", open, "--master-user", "alice")
	assert.Equal(t, 2, code)
	assert.Equal(t, "locklab: --master-user alice: give the user's password with --master-password\n", stderr)
}
