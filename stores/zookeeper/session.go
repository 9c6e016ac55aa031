// Sessions: a new connection's, awaited before its first request; and
// sessions on the run's clock: a time step that passes a silent client's
// session timeout ends its session on the servers, as the leader would,
// and waits for the client's connection to open its next one.

package zookeeper

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/locklab/locklab/harness"
)

// newSession waits until the client's connection has a session other
// than old (old expired), or until timeout or ctx ends. resumed says that
// the connection is back on old instead: it reached a server before the
// end of old was applied there.
func (cl *zkClient) newSession(ctx context.Context, old int64, timeout time.Duration) (ok, resumed bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		cl.mu.Lock()
		cl.changed.Broadcast()
		cl.mu.Unlock()
	})
	defer stop()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for cl.sess.id == 0 && ctx.Err() == nil {
		cl.changed.Wait()
	}
	return cl.sess.id != 0 && cl.sess.id != old, cl.sess.id == old
}

// Advance moves the store's clock by d, and ends the session of every
// client the servers have heard nothing from for the session's timeout
// (harness.TTL on the run's clock): a crashed, cut-off or paused client
// sends no heartbeat. It returns how many sessions it ended.
func (s *zkStore) Advance(ctx context.Context, _ int, d time.Duration) (int, error) {
	s.mu.Lock()
	s.now += d
	clients := slices.Clone(s.clients)
	s.mu.Unlock()
	ended := 0
	for _, cl := range clients {
		silent := cl.c.Silent()
		cl.mu.Lock()
		if !silent {
			cl.silent = 0
		} else {
			cl.silent += d
		}
		due := silent && cl.silent >= harness.TTL && cl.sess.id != 0
		sess := cl.sess
		if due {
			cl.sess = session{}
		}
		cl.mu.Unlock()
		if !due {
			continue
		}
		cl.mu.Lock()
		dead, sending := cl.dead, cl.sending > 0
		cl.mu.Unlock()
		// What waits for the session's end wakes before the servers end
		// it: the waiters' connections learn of it at once.
		cl.sessionEnded()
		if err := s.renew(ctx, cl, sess, !dead && !sending); err != nil {
			return ended, err
		}
		ended++
	}
	return ended, nil
}

// renew ends cl's session sess on the ensemble and, unless wait is false,
// waits for the client's connection to open its next one.
//
// The server closes the expired session's connection, and the client
// learns of the expiry when it connects again; go-zookeeper then opens a
// new session on its own. That happens before the next step, as it would
// long before a real client's next request (the time step lasted the
// session timeout): the client's next request runs on its new session,
// whatever the machine's speed. A client that has crashed opens none; one
// whose request waits for its grant learns of the expiry with that
// request's answer, as its connection opens no session before the request
// is sent. A connection that reached a server before the session's end was
// applied there resumes the session: the store ends it again.
func (s *zkStore) renew(ctx context.Context, cl *zkClient, sess session, wait bool) error {
	for try := 1; ; try++ {
		if err := s.expire(ctx, sess); err != nil {
			return fmt.Errorf("expiring c%d's session %#x on %s: %w", cl.c.ID(), sess.id, s.node.Name(), err)
		}
		if !wait {
			return nil
		}
		// A handshake answered on the session before its end was applied
		// is no resumption. The socket on the ended session is closed (a
		// server other than the one that ended it would tell the client
		// only at its next heartbeat); one whose handshake is under way
		// is left alone: cutting a new session's handshake would leave a
		// session on the servers that nobody learns of.
		cl.mu.Lock()
		if cl.sess.id == sess.id {
			cl.sess = session{}
		}
		cur := cl.sock
		cl.mu.Unlock()
		if cur != nil && cur.sessionID() == sess.id {
			cur.Conn.Close()
		}
		ok, resumed := cl.newSession(ctx, sess.id, 10*time.Second)
		if ok {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !resumed || try == 5 {
			return fmt.Errorf("c%d opened no new session after its session %#x expired on %s", cl.c.ID(), sess.id, s.node.Name())
		}
		cl.mu.Lock()
		cl.sess = session{}
		cl.mu.Unlock()
	}
}

// expire ends session sess on the ensemble: a connection of its own with
// the session's id and password, and a closeSession request on it. A
// server may close that connection before it answers the close: the
// server the session was on closes every connection of a session it ends,
// and answers none (ZooKeeper's FinalRequestProcessor); the client's own
// connection, which the handshake cut, may come back on the session first
// and cut this one; or the server serves no client while its ensemble
// elects a leader, which on a loaded machine can take seconds. So the
// store tries every server again until a handshake says the session is
// gone (session id 0) or expirePatience has passed: the first round again
// at once (a handshake tells a close that ended the session from one cut
// short), the later ones waiting longer each round.
func (s *zkStore) expire(ctx context.Context, sess session) error {
	var last error
	give := time.Now().Add(expirePatience)
	for delay := time.Duration(0); ; delay = min(max(2*delay, 50*time.Millisecond), time.Second) {
		for _, addr := range s.node.Ensemble.Addrs() {
			if last = closeSession(ctx, addr, sess); last == nil {
				return nil
			}
		}
		if time.Now().After(give) {
			return last
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// expirePatience is how long expire keeps trying to end a session: longer
// than an election of the ensemble takes on a loaded machine.
const expirePatience = 30 * time.Second

// closeSession closes session sess through the server at addr: the
// handshake and the close go out together, so that the close is read
// before the client's own connection can come back on the session.
func closeSession(ctx context.Context, addr string, sess session) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	} else {
		nc.SetDeadline(time.Now().Add(10 * time.Second))
	}
	sess.timeout = int32(sessionTimeout / time.Millisecond)
	if _, err := nc.Write(append(connectRequest(sess), closeRequest(1)...)); err != nil {
		return err
	}
	resp, err := readFrame(nc)
	if err != nil {
		return err
	}
	got, err := readConnectResponse(resp)
	if err != nil {
		return err
	}
	if got.id == 0 {
		return nil // expired already
	}
	_, err = readFrame(nc) // the close's answer
	return err
}

// sessionWait bounds the wait for a new session where no context does
// (Store.Connect): a session is a write the ensemble's leader commits, and
// waits for a leader where the ensemble is electing one. The bound is for
// an ensemble that never answers, not for a slow one.
const sessionWait = 2 * time.Minute

// awaitSession waits until a connection's events say it has a session,
// then drains its later events; it gives up when ctx ends.
func awaitSession(ctx context.Context, events <-chan zk.Event) error {
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("zookeeper: no session yet: %w", context.Cause(ctx))
		}
	}
}
