package goredis_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/adapters/goredis"
	"github.com/locklab/locklab/internal/tooling/counting"
)

// viaPool is a NewClient client over a redigo pool of the test server,
// with the pool and the count of the commands sent through it.
func viaPool(t *testing.T, opt *redis.Options) (*redis.Client, *redigo.Pool, *counting.Source) {
	t.Helper()
	pool := locklab.NewPool(addr)
	src := &counting.Source{Src: pool}
	rdb := goredis.NewClient(src, opt)
	t.Cleanup(func() {
		rdb.Close()
		pool.Close()
	})
	return rdb, pool, src
}

// inUse is how many of the pool's connections are taken.
func inUse(p *redigo.Pool) int { return p.ActiveCount() - p.IdleCount() }

func TestNewClientCommands(t *testing.T) {
	rdb, pool, src := viaPool(t, nil)
	ctx := context.Background()
	key := "newclient:commands"
	rdb.Del(ctx, key)
	if n := src.Commands(); n != 1 {
		t.Fatalf("one DEL on a new connection sent %d commands through the source, want 1 (the handshake reaches it?)", n)
	}
	ok, err := rdb.SetNX(ctx, key, "tok", 30*time.Second).Result()
	if err != nil || !ok {
		t.Fatalf("SetNX = %v, %v; want true", ok, err)
	}
	if ok, err := rdb.SetNX(ctx, key, "other", 30*time.Second).Result(); err != nil || ok {
		t.Fatalf("second SetNX = %v, %v; want false", ok, err)
	}
	if v, err := rdb.Get(ctx, key).Result(); err != nil || v != "tok" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("PTTL = %v", ttl)
	}
	if _, err := rdb.Get(ctx, key+":none").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("Get of a missing key: %v, want redis.Nil", err)
	}
	if err := rdb.Incr(ctx, key).Err(); err == nil || !errors.As(err, new(redis.Error)) {
		t.Fatalf("INCR of a token: %v, want the server's error", err)
	}
	if n := rdb.Del(ctx, key).Val(); n != 1 {
		t.Fatalf("Del = %d", n)
	}
	if n := src.Commands(); n != 8 {
		t.Errorf("8 commands sent %d through the source", n)
	}
	if n := inUse(pool); n != 0 {
		t.Errorf("%d connections of the source held between commands, want none", n)
	}
}

func TestNewClientPipeline(t *testing.T) {
	rdb, pool, src := viaPool(t, nil)
	ctx := context.Background()
	key := "newclient:pipeline"
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.RPush(ctx, key, "a", "b", "c")
		p.LRange(ctx, key, 0, -1)
		p.Get(ctx, key+":none")
		return nil
	})
	if !errors.Is(err, redis.Nil) {
		t.Fatalf("Pipelined: %v, want the GET's redis.Nil", err)
	}
	if got := cmds[2].(*redis.StringSliceCmd).Val(); len(got) != 3 || got[2] != "c" {
		t.Fatalf("LRANGE = %q", got)
	}
	if n := src.Commands(); n != 4 {
		t.Errorf("a pipeline of 4 sent %d commands through the source", n)
	}
	if n := inUse(pool); n != 0 {
		t.Errorf("%d connections of the source held after the pipeline", n)
	}
}

func TestNewClientTransaction(t *testing.T) {
	rdb, pool, _ := viaPool(t, nil)
	ctx := context.Background()
	key := "newclient:tx"
	rdb.Del(ctx, key)
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, key)
		p.PExpire(ctx, key, time.Minute)
		return nil
	})
	if err != nil || cmds[0].(*redis.IntCmd).Val() != 1 || !cmds[1].(*redis.BoolCmd).Val() {
		t.Fatalf("TxPipelined = %v, %v", cmds, err)
	}

	// WATCH … MULTI … EXEC on one connection of the source; a write of
	// another client between WATCH and EXEC aborts it.
	other := locklab.NewPool(addr)
	defer other.Close()
	err = rdb.Watch(ctx, func(tx *redis.Tx) error {
		if n := inUse(pool); n != 1 {
			t.Errorf("%d connections of the source held inside WATCH, want 1", n)
		}
		if _, err := tx.Get(ctx, key).Int(); err != nil {
			return err
		}
		c := other.Get()
		defer c.Close()
		if _, err := c.Do("INCR", key); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, key)
			return nil
		})
		return err
	}, key)
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("WATCH with a write between: %v, want redis.TxFailedErr", err)
	}
	if n := inUse(pool); n != 0 {
		t.Errorf("%d connections of the source held after EXEC", n)
	}
	if v := rdb.Get(ctx, key).Val(); v != "2" {
		t.Errorf("key = %q, want 2 (the aborted INCR not applied)", v)
	}
}

func TestNewClientScript(t *testing.T) {
	rdb, pool, src := viaPool(t, nil)
	ctx := context.Background()
	key := "newclient:script"
	// A script of its own body, unknown to the server's cache: the first
	// Run's EVALSHA is answered NOSCRIPT, and go-redis sends EVAL.
	body := `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0 -- ` + time.Now().String()
	script := redis.NewScript(body)
	rdb.Set(ctx, key, "tok", time.Minute)
	before := src.Commands()
	if n, err := script.Run(ctx, rdb, []string{key}, "other").Int(); err != nil || n != 0 {
		t.Fatalf("script with another token = %d, %v", n, err)
	}
	if n := src.Commands() - before; n != 2 {
		t.Errorf("the first Run sent %d commands through the source, want 2 (EVALSHA, then EVAL)", n)
	}
	before = src.Commands()
	if n, err := script.Run(ctx, rdb, []string{key}, "tok").Int(); err != nil || n != 1 {
		t.Fatalf("script with the token = %d, %v", n, err)
	}
	if n := src.Commands() - before; n != 1 {
		t.Errorf("the second Run sent %d commands through the source, want 1 (EVALSHA)", n)
	}
	if n := inUse(pool); n != 0 {
		t.Errorf("%d connections of the source held after the scripts", n)
	}
}

// A connection of the source that fails reaches go-redis as a dropped
// connection: the command fails (no retry here), and the next one runs on
// a new connection.
func TestNewClientDropped(t *testing.T) {
	fail := true
	pool := locklab.NewPool(addr)
	defer pool.Close()
	src := sourceFunc(func(ctx context.Context) (redigo.Conn, error) {
		if fail {
			fail = false
			a, b := net.Pipe()
			b.Close() // every write to a fails
			return redigo.NewConn(a, time.Second, time.Second), nil
		}
		return pool.GetContext(ctx)
	})
	rdb := goredis.NewClient(src, &redis.Options{MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err == nil || errors.As(err, new(redis.Error)) {
		t.Fatalf("PING on a failing connection: %v, want a connection error", err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING on the next connection: %v", err)
	}
}

type sourceFunc func(context.Context) (redigo.Conn, error)

func (f sourceFunc) GetContext(ctx context.Context) (redigo.Conn, error) { return f(ctx) }
