package rueidis

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/locklab/locklab"
)

var _ locklab.Subscriber = (*Source)(nil)

// PSubscribe subscribes to the channels that match pattern on a dedicated
// connection of the client (Client.Dedicate, with rueidis.PubSubHooks),
// and returns once the server has confirmed it: a locklab.Notifier on the
// Source listens through it. On a cluster the subscription is on one
// node, which hears what is published on any of them.
func (s *Source) PSubscribe(ctx context.Context, pattern string) (locklab.Subscription, error) {
	d, cancel := s.client.Dedicate()
	sub := &subscription{d: d, cancel: cancel, signal: make(chan struct{}, 1)}
	sub.lost = d.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage:      func(m rueidis.PubSubMessage) { sub.push(m.Channel) },
		OnSubscription: func(rueidis.PubSubSubscription) {},
	})
	c := d.B().Psubscribe().Pattern(pattern).Build()
	if s.client.Mode() == rueidis.ClientModeCluster {
		c = c.SetSlot(pattern) // a cluster's dedicated connection needs a node
	}
	if err := d.Do(ctx, c).Error(); err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}

// subscription is a locklab.Subscription on a dedicated rueidis
// connection: its hooks queue the channels of the messages, and a PING's
// reply queues "".
type subscription struct {
	d      rueidis.DedicatedClient
	cancel func()
	lost   <-chan error // the hooks' end: the connection failed or closed

	mu     sync.Mutex
	queue  []string
	signal chan struct{} // something was queued
	once   sync.Once
}

func (s *subscription) push(channel string) {
	s.mu.Lock()
	s.queue = append(s.queue, channel)
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// errSubscriptionLost ends a subscription whose connection closed without
// saying why.
var errSubscriptionLost = errors.New("locklab rueidis adapter: subscription connection closed")

// Receive returns the channel of the next message, "" for a PING's reply.
func (s *subscription) Receive(timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			ch := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return ch, nil
		}
		s.mu.Unlock()
		select {
		case <-s.signal:
		case err, ok := <-s.lost:
			if !ok || err == nil {
				err = errSubscriptionLost
			}
			return "", err
		case <-t.C:
			return "", context.DeadlineExceeded
		}
	}
}

// Ping sends a PING on the subscription's connection; Receive sees its
// reply.
func (s *subscription) Ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), locklab.NotifierHealthEvery)
	defer cancel()
	if err := s.d.Do(ctx, s.d.B().Ping().Build()).Error(); err != nil {
		return err
	}
	s.push("")
	return nil
}

// Close ends the subscription and closes its connection.
func (s *subscription) Close() error {
	s.once.Do(func() {
		s.d.Close()
		s.cancel()
	})
	return nil
}
