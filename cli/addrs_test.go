package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/redistest"
)

// MinimalACL is the ACL rule the README gives for a user that runs locklab
// against a server it shares: every key and channel it names carries the
// "{locklab:" tag of a run's namespace, and it needs no command that
// flushes, configures or lists the keys of the server.
var minimalACL = []any{"resetkeys", "~*{locklab:*", "resetchannels", "&*{locklab:*",
	"-@all", "+@read", "+@write", "+@keyspace", "+@scripting", "+@transaction", "+@connection",
	"-@dangerous", "+info", "+wait", "+publish"}

// userData is what a shared server held before locklab came: in each of
// databases 0-3, keys of every kind, some with a TTL, some named like the
// keys locklab writes on servers of its own.
type userData struct {
	// keys[db][name] = TYPE and value as read back.
	keys [4]map[string]string
}

func seedUserData(t *testing.T, s *redistest.Server) userData {
	t.Helper()
	var u userData
	for db := range 4 {
		c, err := redis.Dial("tcp", s.Addr, redis.DialDatabase(db))
		require.NoError(t, err)
		for _, cmd := range [][]any{
			{"SET", fmt.Sprintf("user:%d", db), "alice"},
			{"SET", fmt.Sprintf("session:%d", db), "token", "PX", 3_600_000},
			{"HSET", fmt.Sprintf("cart:%d", db), "apples", "3"},
			{"SET", "lock:stale-recovery", "a lock of the user's own"},
			{"SET", "locklab:stress", "the user's, not locklab's"},
			{"SET", "locklab:fences", "not a hash"},
			{"SET", "bench:set-nx-px", "x", "PX", 3_600_000},
		} {
			_, err := c.Do(cmd[0].(string), cmd[1:]...)
			require.NoError(t, err)
		}
		u.keys[db] = dump(t, c)
		c.Close()
	}
	return u
}

// dump reads every key of c's database: its type, value and whether it
// has a TTL.
func dump(t *testing.T, c redis.Conn) map[string]string {
	t.Helper()
	keys, err := redis.Strings(c.Do("KEYS", "*"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, k := range keys {
		typ, err := redis.String(c.Do("TYPE", k))
		require.NoError(t, err)
		var v any
		switch typ {
		case "string":
			v, err = redis.String(c.Do("GET", k))
		case "hash":
			v, err = redis.StringMap(c.Do("HGETALL", k))
		default:
			v = "?"
		}
		require.NoError(t, err)
		pttl, err := redis.Int64(c.Do("PTTL", k))
		require.NoError(t, err)
		ttl := "no TTL"
		if pttl >= 0 {
			ttl = "TTL"
		}
		out[k] = fmt.Sprintf("%s %v %s", typ, v, ttl)
	}
	return out
}

// check finds the user's data as it was: the same keys with the same
// values in every database, no key more, and TTLs that only real time
// shortened.
func (u userData) check(t *testing.T, s *redistest.Server, after string) {
	t.Helper()
	for db := range 4 {
		c, err := redis.Dial("tcp", s.Addr, redis.DialDatabase(db))
		require.NoError(t, err)
		got := dump(t, c)
		if !assert.Equal(t, u.keys[db], got, "database %d after %s", db, after) {
			var extra []string
			for k := range got {
				if _, ok := u.keys[db][k]; !ok {
					extra = append(extra, k)
				}
			}
			sort.Strings(extra)
			t.Logf("keys left in database %d: %s", db, strings.Join(extra, " "))
		}
		pttl, err := redis.Int64(c.Do("PTTL", fmt.Sprintf("session:%d", db)))
		require.NoError(t, err)
		assert.Greater(t, pttl, int64(time.Hour-10*time.Minute)/1e6, "database %d after %s: the TTL of a user's key moved", db, after)
		c.Close()
	}
}

// TestAddrsLeavesOtherDataIntact points every command at a server that
// holds data of its own in databases 0-3, through an ACL user with the
// README's minimal rule on database 0 and through a user with every
// permission on database 2, and finds every key of that data intact after
// each: the runs write only keys of their own namespace and delete only
// those.
func TestAddrsLeavesOtherDataIntact(t *testing.T) {
	t.Parallel()
	s := redistest.StartOne(t)
	s.Do(t, "ACL", append([]any{"SETUSER", "runner", "reset", "on", ">s3cret"}, minimalACL...)...)
	s.ACLUser(t, "admin", "adm1n") // every permission: nothing but locklab's own care stands between it and the data
	u := seedUserData(t, s)
	for _, url := range []string{"redis://runner:s3cret@" + s.Addr, "redis://admin:adm1n@" + s.Addr + "/2"} {
		for _, args := range [][]string{
			{"race-demo"},
			{"demo", "stale-recovery", "-s", "setnx-del,set-nx-px,hash-reentrant,incr-expire-multi"},
			{"demo", "release-after-expiry", "-s", "set-nx-px-getdel"},
			{"explore", "-x", "stale-recovery", "-s", "setnx-del", "--workers", "3"},
			{"explore", "-x", "release-after-expiry", "-s", "set-nx-px", "--max-schedules", "100"},
			{"matrix", "-s", "setnx-del,set-nx-px,setnx-expire", "-x", "stale-recovery,crash-before-expire,ttl-pushed-by-waiters"},
			{"report", "-s", "setnx-getset", "-x", "stale-recovery", "-o", filepath.Join(t.TempDir(), "r.html")},
			{"stress", "-s", "set-nx-px", "--cycles", "50", "--duration", "2m"},
			{"stress", "-s", "setnx-del", "--cycles", "10", "--duration", "2m", "--processes", "--clients", "2"},
			{"bench", "-s", "set-nx-px,setnx-getset,incr-expire-multi", "--rounds", "1", "--cycles", "20"},
		} {
			full := append(args, "--addr", url)
			_, stderr, err := run(t, full...)
			require.NoError(t, err, "%s\n%s", strings.Join(full, " "), stderr)
			u.check(t, s, strings.Join(full, " "))
		}
	}
	_, _, err := run(t, "play", "--addr", "redis://runner:s3cret@"+s.Addr)
	require.Error(t, err, "play starts servers of its own")
	u.check(t, s, "play")
}

// TestAddrsPassword: a server with requirepass takes the password of the
// URL (and of password@host:port) in every command that runs schedules.
func TestAddrsPassword(t *testing.T) {
	t.Parallel()
	s := redistest.StartOne(t)
	s.Do(t, "CONFIG", "SET", "requirepass", "s3cret")
	s.Pool.Close()
	for _, addr := range []string{"redis://:s3cret@" + s.Addr, "s3cret@" + s.Addr, "redis://default:s3cret@" + s.Addr + "/1"} {
		for _, args := range [][]string{
			{"race-demo"},
			{"demo", "stale-recovery", "-s", "setnx-del"},
			{"explore", "-x", "stale-recovery", "-s", "setnx-del", "--first"},
			{"matrix", "-s", "set-nx-px", "-x", "stale-recovery"},
			{"report", "-s", "set-nx-px", "-x", "stale-recovery", "-o", filepath.Join(t.TempDir(), "r.html")},
		} {
			full := append(args, "--addr", addr)
			out, stderr, err := run(t, full...)
			require.NoError(t, err, "%s\n%s", strings.Join(full, " "), stderr)
			assert.NotContains(t, out+stderr, "NOAUTH")
		}
	}
	_, stderr, err := run(t, "demo", "stale-recovery", "-s", "setnx-del", "--addr", "redis://:wrong@"+s.Addr)
	require.Error(t, err)
	assert.Contains(t, err.Error()+stderr, "WRONGPASS")
}

// TestAddrsTLS: a rediss:// URL reaches a TLS server in every command that
// runs schedules, and in stress's worker processes. The CLI runs as a
// process of its own, which trusts the test's CA through SSL_CERT_FILE, as
// any Go program on Linux does.
func TestAddrsTLS(t *testing.T) {
	t.Parallel()
	s := redistest.StartTLS(t)
	url := "rediss://" + s.TLSAddr
	for _, args := range [][]string{
		{"race-demo"},
		{"demo", "stale-recovery", "-s", "setnx-del"},
		{"explore", "-x", "release-after-expiry", "-s", "set-nx-px-del", "--first"},
		{"stress", "-s", "set-nx-px-del", "--cycles", "4", "--duration", "2m", "--processes", "--clients", "2", "--json"},
	} {
		cmd := exec.Command(os.Args[0], append(args, "--addr", url)...)
		cmd.Env = append(os.Environ(), cliChildEnv+"=1", "SSL_CERT_FILE="+s.CAFile)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s\n%s", strings.Join(args, " "), out)
		assert.NotContains(t, string(out), "certificate")
	}
	// Without the CA the server's certificate is refused, at once.
	cmd := exec.Command(os.Args[0], "demo", "stale-recovery", "-s", "setnx-del", "--addr", url)
	cmd.Env = append(os.Environ(), cliChildEnv+"=1", "SSL_CERT_FILE="+filepath.Join(t.TempDir(), "none.pem"))
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "certificate")
	// The plain port of the same server, with no TLS: the data there is
	// the run's only; nothing is left.
	n, err := redis.Int(s.Do(t, "DBSIZE"), nil)
	require.NoError(t, err)
	assert.Zero(t, n, "the runs left keys behind")
}
