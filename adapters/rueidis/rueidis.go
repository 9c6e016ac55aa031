// Package rueidis lets a program that talks to Redis through rueidis use
// every locklab strategy on the client it already has:
//
//	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
//	l, err := strategies.New("set-nx-px", locklab.Config{Pool: locklabrueidis.New(client)})
//
// New returns a locklab.ConnSource over a rueidis.Client (standalone,
// Sentinel or cluster). Commands go through the client's auto-pipelined
// connections; blocking commands (WAIT) through its blocking pool. Replies
// reach the strategies as redigo's would (see locklab's internal/adapt);
// scripts are sent with EVALSHA and again with EVAL when the server answers
// NOSCRIPT. Keys are declared to rueidis, so a cluster client routes each
// command to its slot.
//
// A command sequence that needs one connection (MULTI ... EXEC, WATCH) runs
// on a connection taken with Client.Dedicate: on a cluster, of the master
// that serves the transaction's first key. A strategy whose command must
// follow another on its connection (set-nx-px-wait's WAIT, which waits for
// the writes of its own connection) binds its connection with Stick: every
// connection GetContext returns has a method Stick(ctx, key) error.
// A locklab.Notifier on a Source subscribes through rueidis's own pub/sub
// (PSubscribe, on a dedicated connection with PubSubHooks): a program on
// rueidis gets the Notifier's wake-ups and its one-command handoff. As
// rueidis does, an error reply loses its "ERR " prefix.
//
// NewClient goes the other way: it returns a rueidis client whose
// commands go through a locklab.ConnSource, so that a lock written on
// rueidis runs under locklab's race harness (locklabtest) unchanged, each
// of its commands one step of the schedule.
//
// Source says when it reaches a Redis Cluster (RedisCluster), so that the
// strategies that cannot run on one (Redlock) refuse it.
//
// This is its own module so that locklab's go.mod keeps redigo as its one
// Redis client.
package rueidis

import (
	"context"
	"sort"
	"strings"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/rueidis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/adapt"
)

// Source is a locklab.ConnSource over a rueidis client.
type Source struct {
	client rueidis.Client
	b      adapt.Backend
}

var _ locklab.ConnSource = (*Source)(nil)

// New returns a ConnSource that sends commands through client. Closing the
// client is the caller's business.
func New(client rueidis.Client) *Source {
	return &Source{client: client, b: backend{cc: client, client: client}}
}

// RedisCluster reports whether the client is a cluster client: the
// strategies that cannot run on a Redis Cluster refuse the Source then
// (strategies.ClusterSource).
func (s *Source) RedisCluster() bool {
	return s != nil && s.client != nil && s.client.Mode() == rueidis.ClientModeCluster
}

// GetContext returns a connection over the client. It fails only when ctx
// is done.
func (s *Source) GetContext(ctx context.Context) (redigo.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &conn{}
	c.b = connBackend{s: s}
	c.Conn = adapt.NewConn(&c.b)
	return c, nil
}

// conn is a connection of a Source: a redigo connection whose commands go
// through the client, auto-pipelined with other goroutines' (blocking ones
// on a connection of their own), until Stick binds them to one connection.
type conn struct {
	*adapt.Conn
	b connBackend
}

// Stick sends the connection's commands from now until Close on one
// dedicated connection of the client to the server that serves key (on a
// cluster, the master of key's slot). A command that must follow another
// on its connection, as WAIT follows the writes it waits for, then does.
// Keys of another slot are refused there (CROSSSLOT).
func (c *conn) Stick(_ context.Context, key string) error {
	if c.b.d == nil {
		c.b.d, c.b.cancel = c.b.s.client.Dedicate()
		c.b.key = key
	}
	return nil
}

// Close closes the connection, giving back the one Stick took.
func (c *conn) Close() error {
	err := c.Conn.Close()
	if c.b.cancel != nil {
		c.b.cancel()
		c.b.d, c.b.cancel = nil, nil
	}
	return err
}

// connBackend is a Conn's backend: the Source's, or the dedicated
// connection Stick took.
type connBackend struct {
	s      *Source
	d      rueidis.DedicatedClient
	cancel func()
	key    string
}

func (b *connBackend) Do(ctx context.Context, cmd string, args []any) (any, error) {
	if b.d == nil {
		return b.s.b.Do(ctx, cmd, args)
	}
	return b.stuck().Do(ctx, cmd, args)
}

func (b *connBackend) Dedicate(ctx context.Context) (adapt.Backend, func(), error) {
	if b.d == nil {
		return b.s.b.Dedicate(ctx)
	}
	return b.stuck(), func() {}, nil // already on one connection
}

func (b *connBackend) stuck() backend {
	return backend{cc: b.d, client: b.s.client, key: b.key}
}

// backend sends commands through cc: the client, or one of its dedicated
// connections.
type backend struct {
	cc     rueidis.CoreClient
	client rueidis.Client
	// key, on a dedicated connection of a cluster client, is the key
	// whose slot it serves: keyless commands go there too, and keys of
	// another slot are refused (rueidis would panic).
	key string
}

// Do builds the command with its keys declared and normalizes the reply.
func (b backend) Do(ctx context.Context, cmd string, args []any) (any, error) {
	name := strings.ToUpper(cmd)
	from, to := adapt.KeyRange(name, args)
	head := make([]string, 1+from)
	head[0] = cmd
	for i, a := range args[:from] {
		head[1+i] = adapt.String(a)
	}
	a := b.cc.B().Arbitrary(head...)
	if to > from {
		a = a.Keys(strs(args[from:to])...)
	}
	if to < len(args) {
		a = a.Args(strs(args[to:])...)
	}
	var c rueidis.Completed
	if adapt.Blocking(name) {
		c = a.Blocking()
	} else {
		c = a.Build()
	}
	if b.key != "" && b.client.Mode() == rueidis.ClientModeCluster {
		pinned := c.SetSlot(b.key)
		if to == from {
			c = pinned
		} else if c.Slot() != pinned.Slot() {
			return nil, errCrossSlot
		}
	}
	res := b.cc.Do(ctx, c)
	if err := res.NonRedisError(); err != nil {
		return nil, err
	}
	msg, _ := res.ToMessage()
	v := normalize(&msg)
	if err, ok := v.(redigo.Error); ok {
		return nil, err
	}
	return v, nil
}

func strs(args []any) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = adapt.String(a)
	}
	return out
}

// Dedicate takes one connection of the client; on a cluster, of the master
// that serves the transaction's first key.
func (b backend) Dedicate(context.Context) (adapt.Backend, func(), error) {
	if b.client.Mode() == rueidis.ClientModeCluster {
		t := &clusterTx{client: b.client}
		return t, t.close, nil
	}
	d, cancel := b.client.Dedicate()
	return backend{cc: d, client: b.client}, cancel, nil
}

// clusterTx is a transaction on a cluster: it takes a dedicated connection
// at its first key (a WATCH's or a queued command's), to the master that
// serves it, sending a MULTI that came before that key there first, and
// gives it back when the transaction ends (EXEC, DISCARD, UNWATCH), so that
// the connection's next commands go to their own keys' masters again. (A
// connection rueidis dedicates to the slot of a keyless MULTI panics at the
// first key.) A transaction with no key at all runs on any master.
type clusterTx struct {
	client rueidis.Client
	on     backend
	cancel func()
	multi  bool // a MULTI waits for the first key
	// crossed: a queued command named a key of another slot; EXEC
	// discards the transaction then, as a server does after an error.
	crossed bool
}

// errCrossSlot is Redis's answer to keys of several slots in one request.
const errCrossSlot = redigo.Error("CROSSSLOT Keys in request don't hash to the same slot")

func (t *clusterTx) Do(ctx context.Context, cmd string, args []any) (any, error) {
	name := strings.ToUpper(cmd)
	if t.cancel == nil {
		from, to := adapt.KeyRange(name, args)
		switch {
		case from == to && name == "MULTI" && !t.multi:
			t.multi = true
			return []byte("OK"), nil
		case from == to && !t.multi:
			// Outside a transaction: through the cluster client.
			return backend{cc: t.client, client: t.client}.Do(ctx, cmd, args)
		}
		key := "locklab:tx" // a transaction without keys runs on any master
		if from < to {
			key = adapt.String(args[from])
		}
		d, cancel := t.client.Dedicate()
		t.on, t.cancel = backend{cc: d, client: t.client, key: key}, cancel
		if t.multi {
			if _, err := t.on.Do(ctx, "MULTI", nil); err != nil {
				t.close()
				return nil, err
			}
		}
	}
	if name == "EXEC" && t.crossed {
		t.on.Do(ctx, "DISCARD", nil)
		t.close()
		return nil, redigo.Error("EXECABORT Transaction discarded because of previous errors.")
	}
	v, err := t.on.Do(ctx, cmd, args)
	switch {
	case err == errCrossSlot && t.multi:
		t.crossed = true
	case name == "EXEC" || name == "DISCARD" || name == "UNWATCH":
		t.close()
	}
	return v, err
}

func (t *clusterTx) Dedicate(context.Context) (adapt.Backend, func(), error) {
	return t, func() {}, nil
}

// close gives the connection back and forgets the transaction.
func (t *clusterTx) close() {
	if t.cancel != nil {
		t.cancel()
	}
	t.on, t.cancel, t.multi, t.crossed = backend{}, nil, false, false
}

// normalize folds a rueidis message into redigo's RESP2 forms, with every
// string as []byte and an error reply as a redigo redis.Error value.
func normalize(m *rueidis.RedisMessage) any {
	switch {
	case m.IsNil():
		return nil
	case m.IsInt64():
		v, _ := m.AsInt64()
		return v
	case m.IsString():
		s, _ := m.ToString()
		return []byte(s)
	case m.IsArray():
		vs, _ := m.ToArray()
		out := make([]any, len(vs))
		for i := range vs {
			out[i] = normalize(&vs[i])
		}
		return out
	case m.IsMap():
		return mapPairs(m)
	case m.IsBool():
		if b, _ := m.AsBool(); b {
			return int64(1)
		}
		return int64(0)
	case m.IsFloat64():
		s, _ := m.ToAny()
		return []byte(adapt.String(s))
	}
	if err := m.Error(); err != nil {
		return redigo.Error(err.Error())
	}
	// Verbatim strings and big numbers.
	v, err := m.ToAny()
	if err != nil {
		return redigo.Error(err.Error())
	}
	return []byte(adapt.String(v))
}

// mapPairs flattens a RESP3 map into key/value pairs. rueidis hands a map
// out only as a Go map, which keeps no order: the pairs are sorted by key
// for a stable reply.
func mapPairs(m *rueidis.RedisMessage) any {
	kv, err := m.ToMap()
	if err != nil {
		return redigo.Error(err.Error())
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]any, 0, 2*len(kv))
	for _, k := range keys {
		e := kv[k]
		out = append(out, []byte(k), normalize(&e))
	}
	return out
}
