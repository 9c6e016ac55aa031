// Package goredis lets a program that talks to Redis through go-redis (v9)
// use every locklab strategy on the client it already has:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	l, err := strategies.New("set-nx-px", locklab.Config{Pool: goredis.New(rdb)})
//
// New returns a locklab.ConnSource over any redis.UniversalClient: a
// *redis.Client, a Sentinel-backed failover client, a *redis.ClusterClient
// or a *redis.Ring. Commands go through the client's own pool, timeouts,
// hooks and retries. Replies reach the strategies as redigo's would (see
// locklab's internal/adapt); scripts are sent with EVALSHA and again with
// EVAL when the server answers NOSCRIPT.
//
// A command sequence that needs one connection (MULTI ... EXEC, WATCH) runs
// on a connection taken from the client with Conn, which *redis.Client
// (also the failover client) has; on other clients it fails, so the one
// strategy that uses MULTI, incr-expire-multi, needs a *redis.Client.
// Pub/sub (locklab.Notifier) is not available through the adapter: give the
// Notifier a redigo pool.
//
// This is its own module so that locklab's go.mod keeps redigo as its one
// Redis client.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/adapt"
)

// Source is a locklab.ConnSource over a go-redis client.
type Source struct {
	client redis.UniversalClient
	// b is the backend every connection shares, made once: a method
	// value and an interface conversion per connection would allocate.
	b adapt.Backend
}

var _ locklab.ConnSource = (*Source)(nil)

// New returns a ConnSource that sends commands through client. Closing the
// client is the caller's business.
func New(client redis.UniversalClient) *Source {
	return &Source{client: client, b: backend{do: client.Do, client: client}}
}

// GetContext returns a connection over the client. It does not dial: the
// client's pool does, at the first command. It fails only when ctx is done.
func (s *Source) GetContext(ctx context.Context) (redigo.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return adapt.NewConn(s.b), nil
}

// backend sends commands through client, or through one connection of it
// when do is that connection's Do.
type backend struct {
	do     func(ctx context.Context, args ...any) *redis.Cmd
	client redis.UniversalClient
}

// Do sends cmd with args through the client and normalizes the reply.
func (b backend) Do(ctx context.Context, cmd string, args []any) (any, error) {
	all := make([]any, 1+len(args))
	all[0] = cmd
	copy(all[1:], adapt.Args(args))
	v, err := b.do(ctx, all...).Result()
	if err != nil {
		if err == redis.Nil {
			return nil, nil
		}
		return nil, convertErr(err)
	}
	return normalize(v), nil
}

// Dedicate takes one connection from a client that has Conn.
func (b backend) Dedicate(ctx context.Context) (adapt.Backend, func(), error) {
	c, ok := b.client.(interface{ Conn() *redis.Conn })
	if !ok {
		return nil, nil, fmt.Errorf("locklab goredis adapter: a %T has no dedicated connections for MULTI/WATCH; use a *redis.Client", b.client)
	}
	conn := c.Conn()
	return backend{do: conn.Do, client: b.client}, func() { conn.Close() }, nil
}

// convertErr turns a Redis error reply into a redigo redis.Error, keeping
// other errors (network, context) as they are.
func convertErr(err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		return redigo.Error(re.Error())
	}
	return err
}

// normalize folds a go-redis reply into redigo's RESP2 forms, with every
// string as []byte.
func normalize(v any) any {
	switch v := v.(type) {
	case string:
		return []byte(v)
	case int64:
		return v
	case nil:
		return nil
	case []any:
		for i, e := range v {
			v[i] = normalize(e)
		}
		return v
	case map[any]any:
		// A RESP3 map: go-redis keeps no order, so the pairs are
		// sorted by key for a stable reply.
		keys := make([]any, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		out := make([]any, 0, 2*len(v))
		for _, k := range keys {
			out = append(out, normalize(k), normalize(v[k]))
		}
		return out
	case bool:
		if v {
			return int64(1)
		}
		return int64(0)
	case float64:
		return []byte(strconv.FormatFloat(v, 'g', -1, 64))
	case *big.Int:
		return []byte(v.String())
	case error:
		var re redis.Error
		if errors.As(v, &re) {
			return redigo.Error(re.Error())
		}
		return v
	default:
		return []byte(fmt.Sprint(v))
	}
}
