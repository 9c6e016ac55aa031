package locklab_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want locklab.PoolOptions
	}{
		{"redis://127.0.0.1:6380", locklab.PoolOptions{Addr: "127.0.0.1:6380"}},
		{"redis://example.com", locklab.PoolOptions{Addr: "example.com:6379"}},
		{"redis://", locklab.PoolOptions{Addr: "localhost:6379"}},
		{"redis://alice:s3cret@h:1/4", locklab.PoolOptions{Addr: "h:1", Username: "alice", Password: "s3cret", DB: 4}},
		{"redis://:s3cret@h:1/", locklab.PoolOptions{Addr: "h:1", Password: "s3cret"}},
		{"redis://s3cret@h:1", locklab.PoolOptions{Addr: "h:1", Password: "s3cret"}},
		{"redis://a%40b:p%3Aw@[::1]:7000/2", locklab.PoolOptions{Addr: "[::1]:7000", Username: "a@b", Password: "p:w", DB: 2}},
		// The user-info runs to the last @: a password may hold any
		// character as it is.
		{"redis://:p@ss:w/rd#1@h:1/3", locklab.PoolOptions{Addr: "h:1", Password: "p@ss:w/rd#1", DB: 3}},
		{"redis://bob:se/c?r#e@t@h:1", locklab.PoolOptions{Addr: "h:1", Username: "bob", Password: "se/c?r#e@t"}},
		{"redis://bob:50%25%2Foff@h:1", locklab.PoolOptions{Addr: "h:1", Username: "bob", Password: "50%/off"}},
		{"redis://h:1?dial_timeout=500ms&read_timeout=3s&write_timeout=1s&max_idle=8&max_active=16&idle_timeout=2m",
			locklab.PoolOptions{Addr: "h:1", DialTimeout: 500 * time.Millisecond, ReadTimeout: 3 * time.Second,
				WriteTimeout: time.Second, MaxIdle: 8, MaxActive: 16, IdleTimeout: 2 * time.Minute}},
	} {
		got, err := locklab.ParseURL(tc.url)
		require.NoError(t, err, tc.url)
		assert.Equal(t, tc.want, got, tc.url)
		// URL writes back what ParseURL reads.
		again, err := locklab.ParseURL(got.URL())
		require.NoError(t, err)
		assert.Equal(t, got.Addr, again.Addr)
		assert.Equal(t, got.Username, again.Username)
		assert.Equal(t, got.Password, again.Password)
		assert.Equal(t, got.DB, again.DB)
	}

	o, err := locklab.ParseURL("rediss://u:p@h:6380/1")
	require.NoError(t, err)
	require.NotNil(t, o.TLSConfig, "rediss is TLS")
	assert.Equal(t, uint16(tls.VersionTLS12), o.TLSConfig.MinVersion)
	assert.Equal(t, "rediss://u:xxxxx@h:6380/1", o.Redacted())

	for _, bad := range []string{
		"http://h:1", "h:1", "redis://h:99999", "redis://h:1/x", "redis://h:1/-1",
		"redis://h:1?color=red", "redis://h:1?dial_timeout=soon", "redis://h:1?max_idle=-1",
		"redis://alice:@h:1", "redis://h:1#frag", "redis://h:1?read_timeout=-1s",
	} {
		_, err := locklab.ParseURL(bad)
		assert.ErrorIs(t, err, locklab.ErrInvalid, bad)
	}
	_, err = locklab.ParseURL("redis://alice:hunter2@h:1?color=red")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2", "errors do not show the password")
}

func TestNewPoolOptionsInvalid(t *testing.T) {
	for _, o := range []locklab.PoolOptions{
		{},
		{Addr: "no-port"},
		{Addr: "h:1", Username: "alice"},
		{Addr: "h:1", DB: -1},
		{Addr: "h:1", DialTimeout: -time.Second},
		{Addr: "h:1", MaxActive: -1},
	} {
		_, err := locklab.NewPoolOptions(o)
		assert.ErrorIs(t, err, locklab.ErrInvalid, "%+v", o)
		_, err = o.DialOptions()
		assert.ErrorIs(t, err, locklab.ErrInvalid, "%+v", o)
	}
}

// acquireOn takes and gives back a set-nx-px lock through src, and returns
// the first error.
func acquireOn(ctx context.Context, src locklab.ConnSource, key string) error {
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: src})
	if err != nil {
		return err
	}
	lease, err := l.Acquire(ctx, key, time.Minute)
	if err != nil {
		return err
	}
	return l.Release(ctx, lease)
}

// longTimeouts are options whose timeouts are far longer than any test waits: an
// error that comes back is the server's answer, not a timeout.
func longTimeouts(o locklab.PoolOptions) locklab.PoolOptions {
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Minute, time.Minute, time.Minute
	return o
}

// failsAtOnce checks that err is ErrUnavailable carrying want, and that it
// came well before the one-minute timeouts of longTimeouts.
func failsAtOnce(t *testing.T, began time.Time, err error, want string) {
	t.Helper()
	assert.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.ErrorContains(t, err, want)
	assert.Less(t, time.Since(began), 30*time.Second, "the failure is the answer, not a timeout")
}

func TestPoolOptionsACLAndDB(t *testing.T) {
	s := redistest.StartOne(t)
	user := s.ACLUser(t, "alice", "s3cret")
	ctx := context.Background()

	o, err := locklab.ParseURL("redis://alice:s3cret@" + s.Addr + "/3")
	require.NoError(t, err)
	pool, err := locklab.NewPoolOptions(longTimeouts(o))
	require.NoError(t, err)
	defer pool.Close()
	c, err := pool.GetContext(ctx)
	require.NoError(t, err)
	who, err := redis.String(c.Do("ACL", "WHOAMI"))
	c.Close()
	require.NoError(t, err)
	assert.Equal(t, user, who)

	l, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	require.NoError(t, err)
	lease, err := l.Acquire(ctx, "acl:lock", time.Minute)
	require.NoError(t, err)
	// The lock is in database 3, not in 0.
	assert.Equal(t, int64(0), s.Do(t, "EXISTS", "acl:lock"))
	c = s.Pool.Get()
	_, err = c.Do("SELECT", 3)
	require.NoError(t, err)
	n, err := redis.Int(c.Do("EXISTS", "acl:lock"))
	c.Close()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, l.Release(ctx, lease))

	// A wrong password: Redis's own WRONGPASS, at once.
	o.Password = "wrong"
	bad, err := locklab.NewPoolOptions(longTimeouts(o))
	require.NoError(t, err)
	defer bad.Close()
	began := time.Now()
	err = acquireOn(ctx, bad, "acl:lock")
	failsAtOnce(t, began, err, "WRONGPASS")

	// A user that may not run the lock's commands: NOPERM, at once.
	s.Do(t, "ACL", "SETUSER", "bob", "on", ">pw", "~*", "+@all", "-evalsha", "-eval")
	nop, err := locklab.NewPoolOptions(longTimeouts(locklab.PoolOptions{Addr: s.Addr, Username: "bob", Password: "pw"}))
	require.NoError(t, err)
	defer nop.Close()
	began = time.Now()
	err = acquireOn(ctx, nop, "acl:lock")
	failsAtOnce(t, began, err, "NOPERM")
}

// TestPoolOptionsClientName: every connection of a pool with a
// ClientName says it (CLIENT GETNAME), and the options' dial options too;
// without one a connection has no name.
func TestPoolOptionsClientName(t *testing.T) {
	s := redistest.StartOne(t)
	pool, err := locklab.NewPoolOptions(locklab.PoolOptions{Addr: s.Addr, ClientName: "audited"})
	require.NoError(t, err)
	defer pool.Close()
	c := pool.Get()
	name, err := redis.String(c.Do("CLIENT", "GETNAME"))
	c.Close()
	require.NoError(t, err)
	assert.Equal(t, "audited", name)

	opts, err := locklab.PoolOptions{Addr: s.Addr, ClientName: "dialled"}.DialOptions()
	require.NoError(t, err)
	d, err := redis.Dial("tcp", s.Addr, opts...)
	require.NoError(t, err)
	name, err = redis.String(d.Do("CLIENT", "GETNAME"))
	d.Close()
	require.NoError(t, err)
	assert.Equal(t, "dialled", name)

	c = s.Pool.Get()
	defer c.Close()
	none, err := c.Do("CLIENT", "GETNAME")
	require.NoError(t, err)
	assert.Nil(t, none)
}

func TestPoolOptionsTLS(t *testing.T) {
	s := redistest.StartTLS(t)
	ctx := context.Background()

	o, err := locklab.ParseURL("rediss://" + s.TLSAddr + "/2")
	require.NoError(t, err)
	o.TLSConfig.RootCAs = s.CA
	pool, err := locklab.NewPoolOptions(longTimeouts(o))
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, acquireOn(ctx, pool, "tls:lock"))
	c, err := pool.GetContext(ctx)
	require.NoError(t, err)
	_, err = c.Do("SET", "tls:k", "v")
	c.Close()
	require.NoError(t, err)
	// It went to database 2 over TLS.
	c = s.Pool.Get()
	defer c.Close()
	_, err = c.Do("SELECT", 2)
	require.NoError(t, err)
	v, err := redis.String(c.Do("GET", "tls:k"))
	require.NoError(t, err)
	assert.Equal(t, "v", v)

	// A certificate the client does not trust: the TLS layer's own
	// message, at once.
	o.TLSConfig = &tls.Config{RootCAs: s.OtherCA, MinVersion: tls.VersionTLS12}
	bad, err := locklab.NewPoolOptions(longTimeouts(o))
	require.NoError(t, err)
	defer bad.Close()
	began := time.Now()
	err = acquireOn(ctx, bad, "tls:lock")
	failsAtOnce(t, began, err, "certificate signed by unknown authority")

	// The right CA but another name than the certificate's.
	o.TLSConfig = &tls.Config{RootCAs: s.CA, ServerName: "redis.example", MinVersion: tls.VersionTLS12}
	wrongName, err := locklab.NewPoolOptions(longTimeouts(o))
	require.NoError(t, err)
	defer wrongName.Close()
	began = time.Now()
	err = acquireOn(ctx, wrongName, "tls:lock")
	failsAtOnce(t, began, err, "redis.example")
}

// No error of ParseURL shows the password it was given.
func TestParseURLErrorsHidePassword(t *testing.T) {
	for _, raw := range []string{
		"redis://:s3cret@127.0.0.1:notaport",
		"redis://alice:s3cret@127.0.0.1:6379/abc",
		"redis://:s3cret@127.0.0.1:6379/0?dial_timeout=zz",
		"redis://:s3cret@127.0.0.1:6379/0?nosuch=1",
		"http://:s3cret@127.0.0.1:6379",
		"redis://:s3cret@[::1",
		"redis://:s3cret@127.0.0.1:6379/0?max_idle=x",
		"redis://:s3/cret@127.0.0.1:notaport",
		"redis://:s3cret%zz@127.0.0.1:6379",
		"redis://:s3cret#@127.0.0.1:6379#frag",
	} {
		_, err := locklab.ParseURL(raw)
		require.ErrorIs(t, err, locklab.ErrInvalid, raw)
		assert.NotContains(t, err.Error(), "s3cret", raw)
		assert.NotContains(t, err.Error(), "s3/", raw)
	}
}

// RedactURL hides the password of a URL or address, parsed or not,
// whatever characters it holds.
func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://h:1":                       "redis://h:1",
		"redis://alice:s3cret@h:1/2":        "redis://alice:xxxxx@h:1/2",
		"redis://:se/cret@h:1":              "redis://:xxxxx@h:1",
		"redis://se/c#ret@h:notaport":       "redis://xxxxx@h:notaport",
		"rediss://bob:p@ss:w/rd#1@[::1":     "rediss://bob:xxxxx@[::1",
		"p@ss:w/rd#1@h:1":                   "xxxxx@h:1",
		"h:1":                               "h:1",
		"redis://alice:s3cret@h:1/0?x=1#fr": "redis://alice:xxxxx@h:1/0?x=1#fr",
	} {
		assert.Equal(t, want, locklab.RedactURL(raw), raw)
	}
}
