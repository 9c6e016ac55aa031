package rueidis_test

import (
	"context"
	"net"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/rueidis"

	"github.com/locklab/locklab"
	locklabrueidis "github.com/locklab/locklab/adapters/rueidis"
	"github.com/locklab/locklab/internal/tooling/counting"
)

// viaPool is a NewClient client over a redigo pool of the test server,
// with the pool and the count of the commands sent through it.
func viaPool(t *testing.T, opt rueidis.ClientOption) (rueidis.Client, *redigo.Pool, *counting.Source) {
	t.Helper()
	pool := locklab.NewPool(addr)
	src := &counting.Source{Src: pool}
	c, err := locklabrueidis.NewClient(src, opt)
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		pool.Close()
	})
	return c, pool, src
}

// inUse is how many of the pool's connections are taken.
func inUse(p *redigo.Pool) int { return p.ActiveCount() - p.IdleCount() }

// ctx is cancellable, as the harness's are: rueidis then sends through
// its background writer and reader rather than in the caller's goroutine.
func cancellable(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

func TestNewClientCommands(t *testing.T) {
	c, pool, src := viaPool(t, rueidis.ClientOption{})
	if n := src.Commands(); n != 0 {
		t.Fatalf("NewClient sent %d commands through the source, want 0 (the handshake reaches it?)", n)
	}
	ctx := cancellable(t)
	key := "newclient:commands"
	c.Do(ctx, c.B().Del().Key(key).Build())
	if err := c.Do(ctx, c.B().Set().Key(key).Value("tok").Nx().Px(30*time.Second).Build()).Error(); err != nil {
		t.Fatalf("SET NX PX: %v", err)
	}
	if err := c.Do(ctx, c.B().Set().Key(key).Value("other").Nx().Px(30*time.Second).Build()).Error(); !rueidis.IsRedisNil(err) {
		t.Fatalf("second SET NX: %v, want rueidis.Nil", err)
	}
	if v, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString(); err != nil || v != "tok" {
		t.Fatalf("GET = %q, %v", v, err)
	}
	if ttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64(); err != nil || ttl <= 0 || ttl > 30000 {
		t.Fatalf("PTTL = %d, %v", ttl, err)
	}
	if err := c.Do(ctx, c.B().Get().Key(key+":none").Build()).Error(); !rueidis.IsRedisNil(err) {
		t.Fatalf("GET of a missing key: %v, want rueidis.Nil", err)
	}
	if _, ok := rueidis.IsRedisErr(c.Do(ctx, c.B().Incr().Key(key).Build()).Error()); !ok {
		t.Fatal("INCR of a token: want the server's error")
	}
	if n, err := c.Do(ctx, c.B().Del().Key(key).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("DEL = %d, %v", n, err)
	}
	if n := src.Commands(); n != 8 {
		t.Errorf("8 commands sent %d through the source", n)
	}
	if n := inUse(pool); n != 0 {
		t.Errorf("%d connections of the source held between commands, want none", n)
	}
	// Commands in the caller's goroutine (a context rueidis sees no
	// end to) go the same way.
	if err := c.Do(context.Background(), c.B().Set().Key(key).Value("v").Build()).Error(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if n := src.Commands(); n != 9 {
		t.Errorf("9 commands sent %d through the source", n)
	}
}

func TestNewClientPipeline(t *testing.T) {
	c, pool, src := viaPool(t, rueidis.ClientOption{})
	ctx := cancellable(t)
	key := "newclient:pipeline"
	res := c.DoMulti(ctx,
		c.B().Del().Key(key).Build(),
		c.B().Rpush().Key(key).Element("a", "b", "c").Build(),
		c.B().Lrange().Key(key).Start(0).Stop(-1).Build(),
		c.B().Get().Key(key+":none").Build())
	if got, err := res[2].AsStrSlice(); err != nil || len(got) != 3 || got[2] != "c" {
		t.Fatalf("LRANGE = %q, %v", got, err)
	}
	if err := res[3].Error(); !rueidis.IsRedisNil(err) {
		t.Fatalf("GET of a missing key: %v, want rueidis.Nil", err)
	}
	if n := src.Commands(); n != 4 {
		t.Errorf("a pipeline of 4 sent %d commands through the source", n)
	}
	if n := inUse(pool); n != 0 {
		t.Errorf("%d connections of the source held after the pipeline", n)
	}
}

func TestNewClientTransaction(t *testing.T) {
	c, pool, src := viaPool(t, rueidis.ClientOption{})
	ctx := cancellable(t)
	key := "newclient:tx"
	c.Do(ctx, c.B().Del().Key(key).Build())
	err := c.Dedicated(func(d rueidis.DedicatedClient) error {
		res := d.DoMulti(ctx,
			d.B().Multi().Build(),
			d.B().Incr().Key(key).Build(),
			d.B().Pexpire().Key(key).Milliseconds(60000).Build(),
			d.B().Exec().Build())
		got, err := res[3].ToArray()
		if err != nil || len(got) != 2 {
			t.Fatalf("EXEC = %v, %v", got, err)
		}
		if n, _ := got[0].AsInt64(); n != 1 {
			t.Errorf("INCR in the transaction = %d, want 1", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := src.Commands(); n != 5 {
		t.Errorf("DEL and a transaction of 4 sent %d commands through the source (rueidis's own reach it?)", n)
	}

	// WATCH … MULTI … EXEC on one connection of the source; a write of
	// another client between WATCH and EXEC aborts it.
	other := locklab.NewPool(addr)
	defer other.Close()
	err = c.Dedicated(func(d rueidis.DedicatedClient) error {
		if err := d.Do(ctx, d.B().Watch().Key(key).Build()).Error(); err != nil {
			return err
		}
		if n := inUse(pool); n != 1 {
			t.Errorf("%d connections of the source held inside WATCH, want 1", n)
		}
		if _, err := d.Do(ctx, d.B().Get().Key(key).Build()).AsInt64(); err != nil {
			return err
		}
		o := other.Get()
		defer o.Close()
		if _, err := o.Do("INCR", key); err != nil {
			return err
		}
		res := d.DoMulti(ctx, d.B().Multi().Build(), d.B().Incr().Key(key).Build(), d.B().Exec().Build())
		if err := res[2].Error(); !rueidis.IsRedisNil(err) {
			t.Errorf("EXEC after another client's write: %v, want rueidis.Nil (aborted)", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := inUse(pool); n != 0 {
		t.Errorf("%d connections of the source held after EXEC", n)
	}
	if v, _ := c.Do(ctx, c.B().Get().Key(key).Build()).ToString(); v != "2" {
		t.Errorf("key = %q, want 2 (the aborted INCR not applied)", v)
	}
	if n := src.Commands(); n != 11 {
		t.Errorf("the whole test sent %d commands through the source, want 11", n)
	}
}

func TestNewClientScript(t *testing.T) {
	c, pool, src := viaPool(t, rueidis.ClientOption{})
	ctx := cancellable(t)
	key := "newclient:script"
	// A script of its own body, unknown to the server's cache: the first
	// Exec's EVALSHA is answered NOSCRIPT, and rueidis sends EVAL.
	body := `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0 -- ` + time.Now().String()
	script := rueidis.NewLuaScript(body)
	c.Do(ctx, c.B().Set().Key(key).Value("tok").Px(time.Minute).Build())
	before := src.Commands()
	if n, err := script.Exec(ctx, c, []string{key}, []string{"other"}).AsInt64(); err != nil || n != 0 {
		t.Fatalf("script with another token = %d, %v", n, err)
	}
	if n := src.Commands() - before; n != 2 {
		t.Errorf("the first Exec sent %d commands through the source, want 2 (EVALSHA, then EVAL)", n)
	}
	if n := inUse(pool); n != 0 {
		t.Errorf("%d connections of the source held after the EVAL", n)
	}
	before = src.Commands()
	if n, err := script.Exec(ctx, c, []string{key}, []string{"tok"}).AsInt64(); err != nil || n != 1 {
		t.Fatalf("script with the token = %d, %v", n, err)
	}
	if n := src.Commands() - before; n != 1 {
		t.Errorf("the second Exec sent %d commands through the source, want 1 (EVALSHA)", n)
	}
	if n := inUse(pool); n != 0 {
		t.Errorf("%d connections of the source held after the scripts", n)
	}
}

// A blocking command goes on a connection of rueidis's blocking pool,
// through the source as any other.
func TestNewClientBlocking(t *testing.T) {
	c, pool, src := viaPool(t, rueidis.ClientOption{})
	ctx := cancellable(t)
	key := "newclient:blocking"
	c.Do(ctx, c.B().Del().Key(key).Build())
	c.Do(ctx, c.B().Rpush().Key(key).Element("a").Build())
	got, err := c.Do(ctx, c.B().Blpop().Key(key).Timeout(1).Build()).AsStrSlice()
	if err != nil || len(got) != 2 || got[1] != "a" {
		t.Fatalf("BLPOP = %q, %v", got, err)
	}
	if n := src.Commands(); n != 3 {
		t.Errorf("3 commands sent %d through the source", n)
	}
	if n := inUse(pool); n != 0 {
		t.Errorf("%d connections of the source held after BLPOP", n)
	}
}

// A connection of the source that fails reaches rueidis as a dropped
// connection: without retries the command fails and the next one runs on
// a new connection; with them (rueidis's default) a read-only command is
// sent again there.
func TestNewClientDropped(t *testing.T) {
	for _, retry := range []bool{false, true} {
		fail := true
		pool := locklab.NewPool(addr)
		defer pool.Close()
		src := &counting.Source{Src: sourceFunc(func(ctx context.Context) (redigo.Conn, error) {
			if fail {
				fail = false
				a, b := net.Pipe()
				b.Close() // every write to a fails
				return redigo.NewConn(a, time.Second, time.Second), nil
			}
			return pool.GetContext(ctx)
		})}
		c, err := locklabrueidis.NewClient(src, rueidis.ClientOption{DisableRetry: !retry})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := cancellable(t)
		get := c.B().Get().Key("newclient:dropped").Build()
		err = c.Do(ctx, get).Error()
		if !retry {
			if _, ok := rueidis.IsRedisErr(err); err == nil || ok || rueidis.IsRedisNil(err) {
				t.Fatalf("GET on a failing connection: %v, want a connection error", err)
			}
			if err := c.Do(ctx, c.B().Get().Key("newclient:dropped").Build()).Error(); !rueidis.IsRedisNil(err) {
				t.Fatalf("GET on the next connection: %v", err)
			}
		} else if !rueidis.IsRedisNil(err) {
			t.Fatalf("GET retried after a failing connection: %v, want rueidis.Nil", err)
		}
		if n := src.Commands(); n != 2 {
			t.Errorf("retry %v: %d commands through the source, want 2 (the failed GET, then the GET again)", retry, n)
		}
	}
}

type sourceFunc func(context.Context) (redigo.Conn, error)

func (f sourceFunc) GetContext(ctx context.Context) (redigo.Conn, error) { return f(ctx) }
