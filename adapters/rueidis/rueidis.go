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
// on a connection taken with Client.Dedicate. Pub/sub (locklab.Notifier) is
// not available through the adapter: give the Notifier a redigo pool. As
// rueidis does, an error reply loses its "ERR " prefix.
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

// GetContext returns a connection over the client. It fails only when ctx
// is done.
func (s *Source) GetContext(ctx context.Context) (redigo.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return adapt.NewConn(s.b), nil
}

// backend sends commands through cc: the client, or one of its dedicated
// connections.
type backend struct {
	cc     rueidis.CoreClient
	client rueidis.Client
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

// Dedicate takes one connection of the client.
func (b backend) Dedicate(context.Context) (adapt.Backend, func(), error) {
	d, cancel := b.client.Dedicate()
	return backend{cc: d, client: b.client}, cancel, nil
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
