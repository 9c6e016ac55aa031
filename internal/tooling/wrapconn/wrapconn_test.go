package wrapconn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/internal/tooling/wrapconn"
)

// recorder is a hook that logs every call and can refuse them.
type recorder struct {
	calls  []wrapconn.Call
	refuse error
	closed int
	gets   int
}

func (r *recorder) source(src *redis.Pool) *wrapconn.Source {
	counted := getCounter{src: src, n: &r.gets}
	return &wrapconn.Source{Src: counted, Open: func(context.Context) (wrapconn.Hooks, error) {
		return wrapconn.Hooks{
			Do: func(ctx context.Context, call wrapconn.Call, send wrapconn.Send) (any, error) {
				r.calls = append(r.calls, call)
				if r.refuse != nil {
					return nil, r.refuse
				}
				return send(ctx)
			},
			Close: func() { r.closed++ },
		}, nil
	}}
}

// getCounter counts the real connections taken.
type getCounter struct {
	src *redis.Pool
	n   *int
}

func (g getCounter) GetContext(ctx context.Context) (redis.Conn, error) {
	*g.n++
	return g.src.GetContext(ctx)
}

func TestCommandsAndPipelines(t *testing.T) {
	srv := redistest.StartOne(t)
	rec := &recorder{}
	ctx := context.Background()
	c, err := rec.source(srv.Pool).GetContext(ctx)
	require.NoError(t, err)
	assert.Zero(t, rec.gets, "no real connection before the first command")

	v, err := redis.String(redis.DoContext(c, ctx, "SET", "k", "v"))
	require.NoError(t, err)
	assert.Equal(t, "OK", v)

	// Send, Send, Do: one exchange, the queued commands first.
	require.NoError(t, c.Send("INCR", "n"))
	require.NoError(t, c.Send("INCR", "n"))
	n, err := redis.Int(c.Do("GET", "n"))
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the queued INCRs ran before GET")

	// Send, Flush, Receive: one exchange; a command error comes back from
	// its Receive.
	require.NoError(t, c.Send("INCR", "n"))
	require.NoError(t, c.Send("INCR", "k"))
	require.NoError(t, c.Flush())
	n, err = redis.Int(c.Receive())
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	_, err = c.Receive()
	var re redis.Error
	require.ErrorAs(t, err, &re, "INCR on a string fails")

	// Do("") with queued commands returns every reply.
	require.NoError(t, c.Send("GET", "k"))
	all, err := redis.Values(c.Do(""))
	require.NoError(t, err)
	assert.Len(t, all, 1)
	v2, err := c.Do("")
	assert.NoError(t, err)
	assert.Nil(t, v2, "nothing queued, nothing sent")

	require.Len(t, rec.calls, 4, "an empty Do(\"\") is no exchange")
	assert.Equal(t, 1, rec.calls[0].Commands())
	assert.False(t, rec.calls[0].Pipeline())
	assert.Equal(t, 3, rec.calls[1].Commands())
	assert.True(t, rec.calls[1].Pipeline())
	assert.Equal(t, "", rec.calls[2].Cmd)
	assert.Equal(t, 2, rec.calls[2].Commands())
	assert.Equal(t, 1, rec.gets, "one real connection for the whole life")

	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	assert.Equal(t, 1, rec.closed, "the Close hook runs once")
	_, err = c.Do("PING")
	assert.ErrorIs(t, err, wrapconn.ErrClosed)
	assert.Equal(t, srv.Pool.IdleCount(), srv.Pool.ActiveCount(), "the real connection went back to the pool")
}

func TestRefusedNeverReachesTheServer(t *testing.T) {
	srv := redistest.StartOne(t)
	rec := &recorder{refuse: errors.New("crashed")}
	c, err := rec.source(srv.Pool).GetContext(context.Background())
	require.NoError(t, err)
	_, err = c.Do("SET", "k", "v")
	assert.EqualError(t, err, "crashed")
	assert.Zero(t, rec.gets, "a refused command takes no connection")
	require.NoError(t, c.Close())
	assert.Zero(t, srv.Do(t, "EXISTS", "k"))

	refused := &wrapconn.Source{Src: srv.Pool, Open: func(context.Context) (wrapconn.Hooks, error) {
		return wrapconn.Hooks{}, errors.New("no")
	}}
	_, err = refused.GetContext(context.Background())
	assert.EqualError(t, err, "no")
}

func TestContextAndTimeouts(t *testing.T) {
	srv := redistest.StartOne(t)
	c, err := (&wrapconn.Source{Src: srv.Pool}).GetContext(context.Background())
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = redis.DoContext(c, ctx, "BLPOP", "nothing", 0)
	assert.ErrorIs(t, err, context.Canceled)

	c2, err := (&wrapconn.Source{Src: srv.Pool}).GetContext(context.Background())
	require.NoError(t, err)
	defer c2.Close()
	_, err = redis.DoWithTimeout(c2, 50*time.Millisecond, "BLPOP", "nothing", 0)
	assert.Error(t, err, "the timeout bounds the command")
}

// Pub/sub: a Receive with no pipeline reply pending waits for a pushed
// message, unless the Receive hook answers it.
func TestPubSub(t *testing.T) {
	srv := redistest.StartOne(t)
	c, err := (&wrapconn.Source{Src: srv.Pool}).GetContext(context.Background())
	require.NoError(t, err)
	defer c.Close()
	psc := redis.PubSubConn{Conn: c}
	require.NoError(t, psc.Subscribe("ch"))
	sub, ok := psc.Receive().(redis.Subscription)
	require.True(t, ok)
	assert.Equal(t, "subscribe", sub.Kind)
	srv.Do(t, "PUBLISH", "ch", "hello")
	msg, ok := psc.ReceiveWithTimeout(5 * time.Second).(redis.Message)
	require.True(t, ok)
	assert.Equal(t, "hello", string(msg.Data))

	noPush := errors.New("no push")
	c2, err := (&wrapconn.Source{Src: srv.Pool, Open: func(context.Context) (wrapconn.Hooks, error) {
		return wrapconn.Hooks{Receive: func(context.Context) error { return noPush }}, nil
	}}).GetContext(context.Background())
	require.NoError(t, err)
	defer c2.Close()
	_, err = c2.Receive()
	assert.Error(t, err, "nothing sent, nothing to receive")
	_, err = c2.Do("PING")
	require.NoError(t, err)
	_, err = c2.Receive()
	assert.ErrorIs(t, err, noPush)
}

// TestDroppedEndsTheConnection: a hook that sends a command and answers
// with ErrDropped leaves the command done on the server and the
// connection done for its user: Err says why, every later command and
// Send fails with it, and the real connection has gone back to the pool,
// which can hand it out again.
func TestDroppedEndsTheConnection(t *testing.T) {
	srv := redistest.StartOne(t)
	ctx := context.Background()
	drop := true
	src := &wrapconn.Source{Src: srv.Pool, Open: func(context.Context) (wrapconn.Hooks, error) {
		return wrapconn.Hooks{Do: func(ctx context.Context, call wrapconn.Call, send wrapconn.Send) (any, error) {
			v, err := send(ctx)
			if drop && err == nil {
				return nil, errors.Join(errors.New("reply lost"), wrapconn.ErrDropped)
			}
			return v, err
		}}, nil
	}}
	idle := srv.Pool.IdleCount()
	c, err := src.GetContext(ctx)
	require.NoError(t, err)
	_, err = redis.DoContext(c, ctx, "SET", "dropped", "v")
	require.ErrorIs(t, err, wrapconn.ErrDropped)
	require.ErrorIs(t, c.Err(), wrapconn.ErrDropped)
	_, err = redis.DoContext(c, ctx, "GET", "dropped")
	assert.ErrorIs(t, err, wrapconn.ErrDropped, "a dropped connection runs nothing more")
	assert.ErrorIs(t, c.Send("GET", "dropped"), wrapconn.ErrDropped)
	assert.Equal(t, idle+1, srv.Pool.IdleCount(), "the real connection went back at the drop")
	require.NoError(t, c.Close())

	drop = false
	c2, err := src.GetContext(ctx)
	require.NoError(t, err)
	defer c2.Close()
	v, err := redis.String(redis.DoContext(c2, ctx, "GET", "dropped"))
	require.NoError(t, err)
	assert.Equal(t, "v", v, "the server carried out the command whose reply was dropped")
}
