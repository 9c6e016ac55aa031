// Package goredis lets a program that talks to Redis through go-redis (v9)
// use every locklab strategy on the client it already has:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	l, err := strategies.New("set-nx-px", locklab.Config{Pool: goredis.New(rdb)})
//
// New returns a locklab.ConnSource over any redis.UniversalClient: a
// *redis.Client, a Sentinel-backed failover client, a *redis.ClusterClient
// or a *redis.Ring. Commands go through the client's own timeouts, hooks
// and retries. Replies reach the strategies as redigo's would (see
// locklab's internal/adapt); scripts are sent with EVALSHA and again with
// EVAL when the server answers NOSCRIPT.
//
// The commands a lock cycle sends take a fast path (fast.go): one
// *redis.Cmd each, with no per-call conversion beyond what go-redis's
// reply needs to look like redigo's. On a *redis.Client (a failover client
// too) they run on a few connections the Source keeps from the client
// (Client.Conn; a quarter of its PoolSize at most), each given back to the
// client's pool and taken again after a second, which spares each command
// the pool's checkout and health check; a kept connection sees the
// client's hooks as they were when it was taken. Kept connections idle
// between uses until the Source is next used, and end with the client.
//
// A command sequence that needs one connection (MULTI ... EXEC, WATCH) runs
// on a connection taken from the client with Conn, which *redis.Client
// (also the failover client) has; on a *redis.ClusterClient, on a
// connection of the master that serves the transaction's first key. On a
// *redis.Ring it fails, so the one strategy that uses MULTI,
// incr-expire-multi, does not run on a Ring. A strategy whose command must
// follow another on its connection (set-nx-px-wait's WAIT, which waits for
// the writes of its own connection) binds its connection with Stick: every
// connection GetContext returns has a method Stick(ctx, key) error.
// A locklab.Notifier on a Source subscribes through go-redis's own pub/sub
// (PSubscribe): a program on go-redis gets the Notifier's wake-ups and its
// one-command handoff.
//
// On a Redis Cluster each command goes to the master of its key's slot (a
// script's, of its first key), and Source says it reaches a cluster
// (RedisCluster), so that the strategies that cannot run on one (Redlock)
// refuse it.
//
// Under the race detector, against a server older than Redis 8, go-redis
// (v9.23) reports a data race of its own when two connections taken with
// Conn (a transaction's, a Stick's, a kept one's) first connect at once: the server
// refuses its maintenance-notifications handshake, and each connection
// then switches them off in the client's shared Options under a lock of
// its own. Setting the client's MaintNotificationsConfig to
// maintnotifications.ModeDisabled avoids it, as this module's tests do.
//
// NewClient goes the other way: a *redis.Client whose every command goes
// through a locklab.ConnSource. A lock written on go-redis gets one from
// the Config a locklabtest factory receives, and runs unchanged under the
// race harness, each of its commands one step of the schedule.
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	// kept, on a *redis.Client, holds the fast path's connections.
	kept *kept
	// argCache holds the redigo.Arguments converted (arg), argCount
	// how many were.
	argCache sync.Map
	argCount atomic.Int64
}

var _ locklab.ConnSource = (*Source)(nil)

// New returns a ConnSource that sends commands through client. Closing the
// client is the caller's business.
func New(client redis.UniversalClient) *Source {
	s := &Source{client: client, b: backend{do: client.Do, client: client}}
	if c, ok := client.(*redis.Client); ok {
		s.kept = newKept(c)
	}
	return s
}

// RedisCluster reports whether the client is a *redis.ClusterClient: the
// strategies that cannot run on a Redis Cluster refuse the Source then
// (strategies.ClusterSource).
func (s *Source) RedisCluster() bool {
	if s == nil {
		return false
	}
	_, ok := s.client.(*redis.ClusterClient)
	return ok
}

// GetContext returns a connection over the client. It does not dial: the
// client's pool does, at the first command. It fails only when ctx is done.
func (s *Source) GetContext(ctx context.Context) (redigo.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &conn{}
	c.b.s = s
	return c, nil
}

// conn is a connection of a Source: a redigo connection whose commands go
// through the client, each on whichever of its connections the client
// picks (or one the Source keeps: fast.go), until Stick binds them to one.
// Its commands take the fast path until one needs internal/adapt's
// bookkeeping (a transaction, a watch, a command queued with Send); from
// then on, all of them go through adapt.
type conn struct {
	ad     *adapt.Conn // nil until a command needs it
	b      connBackend
	args   [fastArgs]any
	closed bool
}

var (
	_ redigo.Conn            = (*conn)(nil)
	_ redigo.ConnWithContext = (*conn)(nil)
	_ redigo.ConnWithTimeout = (*conn)(nil)
)

// slow returns the connection's internal/adapt Conn, made at first use.
func (c *conn) slow() *adapt.Conn {
	if c.ad == nil {
		c.ad = adapt.NewConn(&c.b)
	}
	return c.ad
}

// Do sends one command with no deadline of its own (the client's timeouts
// apply).
func (c *conn) Do(cmd string, args ...any) (any, error) {
	return c.DoContext(context.Background(), cmd, args...)
}

// DoWithTimeout sends one command, bounded by timeout.
func (c *conn) DoWithTimeout(timeout time.Duration, cmd string, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.DoContext(ctx, cmd, args...)
}

// DoContext sends one command, bounded by ctx.
func (c *conn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	if c.ad == nil && !c.closed && len(args) < fastArgs && fastCommand(cmd) &&
		(c.b.conn == nil || !c.b.s.RedisCluster()) {
		return c.fast(ctx, cmd, args)
	}
	if c.closed {
		return nil, errClosed
	}
	return c.slow().DoContext(ctx, cmd, args...)
}

// Send queues a command for Flush.
func (c *conn) Send(cmd string, args ...any) error {
	if c.closed {
		return errClosed
	}
	return c.slow().Send(cmd, args...)
}

// Flush sends the queued commands, in order.
func (c *conn) Flush() error {
	if c.closed {
		return errClosed
	}
	return c.slow().Flush()
}

// Receive returns the reply of the oldest command sent and not yet received.
func (c *conn) Receive() (any, error) { return c.ReceiveContext(context.Background()) }

// ReceiveWithTimeout is Receive bounded by timeout.
func (c *conn) ReceiveWithTimeout(timeout time.Duration) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.ReceiveContext(ctx)
}

// ReceiveContext is Receive bounded by ctx.
func (c *conn) ReceiveContext(ctx context.Context) (any, error) {
	if c.closed {
		return nil, errClosed
	}
	return c.slow().ReceiveContext(ctx)
}

// Err returns a non-nil error when the connection is not usable.
func (c *conn) Err() error {
	if c.closed {
		return errClosed
	}
	if c.ad != nil {
		return c.ad.Err()
	}
	return nil
}

// errClosed is the error of a connection used after Close.
var errClosed = errors.New("locklab goredis adapter: connection closed")

// Stick sends the connection's commands from now until Close on one
// connection of the client, to the server that serves key: on a
// *redis.ClusterClient, the master of key's slot. A command that must
// follow another on its connection, as WAIT follows the writes it waits
// for, then does. On a *redis.Ring, which lends no connection, it changes
// nothing.
func (c *conn) Stick(ctx context.Context, key string) error {
	if c.b.conn != nil {
		return nil
	}
	switch cl := c.b.s.client.(type) {
	case *redis.ClusterClient:
		node, err := cl.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		c.b.conn = node.Conn()
	case interface{ Conn() *redis.Conn }:
		c.b.conn = cl.Conn()
	}
	return nil
}

// Close closes the connection, giving back the one Stick took.
func (c *conn) Close() error {
	if c.closed {
		return errClosed
	}
	c.closed = true
	var err error
	if c.ad != nil {
		err = c.ad.Close()
	}
	if c.b.conn != nil {
		c.b.conn.Close()
		c.b.conn = nil
	}
	return err
}

// connBackend is a Conn's backend: the Source's, or the one connection
// Stick took.
type connBackend struct {
	s    *Source
	conn *redis.Conn
}

func (b *connBackend) Do(ctx context.Context, cmd string, args []any) (any, error) {
	if b.conn == nil {
		return b.s.b.Do(ctx, cmd, args)
	}
	return b.stuck().Do(ctx, cmd, args)
}

func (b *connBackend) Dedicate(ctx context.Context) (adapt.Backend, func(), error) {
	if b.conn == nil {
		return b.s.b.Dedicate(ctx)
	}
	return b.stuck(), func() {}, nil // already on one connection
}

func (b *connBackend) stuck() backend {
	cc, _ := b.s.client.(*redis.ClusterClient)
	return backend{do: b.conn.Do, client: b.s.client, reload: cc}
}

// backend sends commands through client, or through one connection of it
// when do is that connection's Do.
type backend struct {
	do     func(ctx context.Context, args ...any) *redis.Cmd
	client redis.UniversalClient
	// reload, on one connection of a cluster's node, is the cluster
	// client, told to read the cluster's layout again when the node
	// redirects a command or fails: the slot moved, or the node did.
	reload *redis.ClusterClient
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
		if b.reload != nil && movedOrDown(err) {
			b.reload.ReloadState(ctx)
		}
		return nil, convertErr(err)
	}
	return normalize(v), nil
}

// movedOrDown reports whether err says that the node no longer serves the
// slot (MOVED, ASK, CLUSTERDOWN) or could not be reached.
func movedOrDown(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return true // not an answer of the server's
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") || strings.HasPrefix(msg, "CLUSTERDOWN")
}

// Dedicate takes one connection from a client that has Conn, and on a
// cluster client a connection of the master of the transaction's first
// key.
func (b backend) Dedicate(ctx context.Context) (adapt.Backend, func(), error) {
	if cc, ok := b.client.(*redis.ClusterClient); ok {
		t := &clusterTx{cc: cc}
		return t, t.close, nil
	}
	c, ok := b.client.(interface{ Conn() *redis.Conn })
	if !ok {
		return nil, nil, fmt.Errorf("locklab goredis adapter: a %T has no dedicated connections for MULTI/WATCH; use a *redis.Client or a *redis.ClusterClient", b.client)
	}
	conn := c.Conn()
	return backend{do: conn.Do, client: b.client}, func() { conn.Close() }, nil
}

// clusterTx is a transaction on a cluster: it takes a connection of the
// master that serves its first key (a WATCH's or a queued command's),
// sending a MULTI that came before that key there first, and gives it back
// when the transaction ends (EXEC, DISCARD, UNWATCH), so that the
// connection's next commands go to their own keys' masters again. A
// transaction with no key at all runs on any master (slot 0's).
type clusterTx struct {
	cc    *redis.ClusterClient
	conn  *redis.Conn
	multi bool // a MULTI waits for the first key
}

func (t *clusterTx) Do(ctx context.Context, cmd string, args []any) (any, error) {
	name := strings.ToUpper(cmd)
	if t.conn == nil {
		from, to := adapt.KeyRange(name, args)
		switch {
		case from == to && name == "MULTI" && !t.multi:
			t.multi = true
			return []byte("OK"), nil
		case from == to && !t.multi:
			// Outside a transaction: through the cluster client.
			return backend{do: t.cc.Do, client: t.cc}.Do(ctx, cmd, args)
		}
		key := ""
		if from < to {
			key = adapt.String(args[from])
		}
		node, err := t.cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		t.conn = node.Conn()
		if t.multi {
			if _, err := t.on().Do(ctx, "MULTI", nil); err != nil {
				t.close()
				return nil, err
			}
		}
	}
	v, err := t.on().Do(ctx, cmd, args)
	switch name {
	case "EXEC", "DISCARD", "UNWATCH":
		t.close()
	}
	return v, err
}

func (t *clusterTx) on() backend { return backend{do: t.conn.Do, client: t.cc, reload: t.cc} }

func (t *clusterTx) Dedicate(context.Context) (adapt.Backend, func(), error) {
	return t, func() {}, nil
}

// close gives the connection back and forgets the transaction.
func (t *clusterTx) close() {
	if t.conn != nil {
		t.conn.Close()
	}
	t.conn, t.multi = nil, false
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
