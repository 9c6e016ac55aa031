package goredis

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locklab/locklab"
)

var _ locklab.Subscriber = (*Source)(nil)

// PSubscribe subscribes to the channels that match pattern through the
// client's own pub/sub (redis.PubSub, on a connection of its own), and
// returns once the server has confirmed it: a locklab.Notifier on the
// Source listens through it. On a *redis.ClusterClient the subscription is
// on one node, which hears what is published on any of them.
func (s *Source) PSubscribe(ctx context.Context, pattern string) (locklab.Subscription, error) {
	ps := s.client.PSubscribe(ctx, pattern)
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	v, err := ps.ReceiveTimeout(ctx, timeout)
	if err == nil {
		if _, ok := v.(*redis.Subscription); !ok {
			err = fmt.Errorf("locklab goredis adapter: unexpected reply %v to PSUBSCRIBE", v)
		}
	}
	if err != nil {
		ps.Close()
		return nil, convertErr(err)
	}
	return &subscription{ps: ps}, nil
}

// subscription is a locklab.Subscription over a redis.PubSub.
type subscription struct {
	ps *redis.PubSub
}

// Receive returns the channel of the next message, "" for another reply.
func (s *subscription) Receive(timeout time.Duration) (string, error) {
	v, err := s.ps.ReceiveTimeout(context.Background(), timeout)
	if err != nil {
		return "", convertErr(err)
	}
	if m, ok := v.(*redis.Message); ok {
		return m.Channel, nil
	}
	return "", nil
}

// Ping sends a PING on the subscription's connection.
func (s *subscription) Ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), locklab.NotifierHealthEvery)
	defer cancel()
	return s.ps.Ping(ctx)
}

// Close ends the subscription and closes its connection.
func (s *subscription) Close() error {
	s.ps.Close()
	return nil
}
