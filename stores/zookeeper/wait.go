// zk-golib's wait: zk.Lock's Lock blocks on its predecessor's watch, not
// on a request. The store says so to the scheduler (harness.Client.Wait),
// which runs the other clients meanwhile, and says when the watch's event
// is on its way (Wake), before the step that causes it ends: a delete of
// the node watched, a write to it, the end of the session that owns it,
// or the end of the waiter's own session. No step then runs between the
// cause and the waiter's answer to it, whatever the machine's speed.

package zookeeper

import (
	"context"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies/zklock"
)

// golibLock builds zk-golib's column: zk.NewLock as its users call it,
// whose Lock waits in the queue until it holds the lock or fails. zk-golib's
// own Acquire gives up after a patience on the wall clock, which zk.Lock's
// users do not have, and which would make a run depend on the machine's
// speed.
func golibLock(cfg locklab.Config) (locklab.Locker, error) {
	l, err := zklock.NewGolibFromConfig(cfg)
	if err != nil {
		return nil, err
	}
	return waitingLock{l}, nil
}

// waitingLock is zk-golib whose Acquire is its Lock.
type waitingLock struct{ *zklock.GolibLock }

func (l waitingLock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.Lock(ctx, key, ttl)
}

// answered follows what request q's successful answer a means for the
// waits: the nodes the client's session owns, the waits it ends, and the
// wait it begins, unless the answer is lost (lose): the client then reads
// an error, not a watch set, and waits for nothing. It runs before the
// request's step ends.
func (cl *zkClient) answered(q request, a reply, lost bool) {
	switch q.op {
	case opCreate, opCreate2:
		if q.flags&flagEphemeral != 0 {
			cl.mu.Lock()
			cl.owns = append(cl.owns, a.path)
			cl.mu.Unlock()
		}
	case opDelete, opSetData:
		cl.s.wake(q.path)
	case opGetData, opExists:
		if _, blocks := cl.c.Locker().(waitingLock); blocks && q.watch && a.found && !lost {
			// zk.Lock's GetW found its predecessor: Lock now waits for
			// the watch's event.
			cl.mu.Lock()
			cl.watching = q.path
			cl.mu.Unlock()
			cl.c.Wait("the watch on " + cl.s.short(q.path))
		}
	}
}

// short is path as a timeline shows it.
func (s *zkStore) short(path string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shortLocked(path)
}

// wake wakes the clients that wait for an event of one of paths.
func (s *zkStore) wake(paths ...string) {
	s.mu.Lock()
	clients := s.clients
	s.mu.Unlock()
	for _, cl := range clients {
		cl.mu.Lock()
		w := cl.watching
		hit := false
		for _, p := range paths {
			hit = hit || w != "" && w == p
		}
		if hit {
			cl.watching = ""
		}
		cl.mu.Unlock()
		if hit {
			cl.c.Wake()
		}
	}
}

// sessionEnded wakes, as the store ends cl's session, the clients that
// watched its ephemeral nodes, which went with it, and cl itself if it
// waited: its connection learns of the expiry as it connects again, and
// fails its watches.
func (cl *zkClient) sessionEnded() {
	cl.mu.Lock()
	owned := cl.owns
	cl.owns = nil
	waited := cl.watching != ""
	cl.watching = ""
	cl.mu.Unlock()
	cl.s.wake(owned...)
	if waited {
		cl.c.Wake()
	}
}
