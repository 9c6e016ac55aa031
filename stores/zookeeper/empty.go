// Emptying between runs: the earlier run's sessions closed, and the lock's
// paths left as the next run needs them, touching only what a run used.

package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/locklab/locklab/strategies/zklock"
)

// Empty closes the earlier run's connections (their sessions end, and
// their ephemeral nodes with them) and deletes what is left under the
// lock's paths, then creates each path the recipes queue under again, so
// that sequence numbers start over and no run creates a parent.
func (s *zkStore) Empty(ctx context.Context) error {
	if err := s.node.Recover(ctx); err != nil {
		return fmt.Errorf("restarting the server a failover killed on %s: %w", s.node.Name(), err)
	}
	if r := s.node.resets.Load(); r != s.resets {
		// The ensemble started afresh (a server lost its data): its
		// servers refuse a connection that saw zxids beyond their own,
		// as the store's did, and know none of the old sessions.
		admin, err := dialAdmin(s.node)
		if err != nil {
			return fmt.Errorf("connecting again to %s, started afresh: %w", s.node.Name(), err)
		}
		go s.admin.Close() // its session is gone: no answer to wait for
		s.admin, s.resets = admin, r
	}
	s.mu.Lock()
	clients, key := s.clients, s.lockKey
	s.clients, s.now = nil, 0
	clear(s.guids)
	s.mu.Unlock()
	if s.node.Ensemble.Closed() {
		// A signal closed the ensemble, and what was written with it:
		// nothing answers, and nothing is left to empty.
		for _, cl := range clients {
			go cl.conn.Close()
		}
		return nil
	}
	var wg sync.WaitGroup
	for _, cl := range clients {
		cl.mu.Lock()
		cl.bound = false
		dead := cl.dead
		cl.mu.Unlock()
		if dead {
			// A crashed client's connection reaches no server: its Close
			// waits 2s to send a closeSession it cannot send.
			go cl.conn.Close()
			continue
		}
		wg.Go(cl.conn.Close)
	}
	wg.Wait()
	// Every session of theirs still open on the servers ends now: a
	// crashed client's, and one whose Close gave up waiting for its
	// answer. The servers would end them at their timeout, in the middle
	// of a later run, and every write moves the zxids, which are the
	// fences a timeline shows; a request still queued on such a session
	// would make a node under the path being emptied.
	for _, cl := range clients {
		cl.mu.Lock()
		sess := cl.sess
		cl.mu.Unlock()
		if sess.id == 0 {
			continue
		}
		if err := s.expire(ctx, sess); err != nil {
			return fmt.Errorf("ending c%d's session %#x on %s: %w", cl.c.ID(), sess.id, s.node.Name(), err)
		}
	}
	if key == "" {
		return nil
	}
	// A request to an ensemble that is gone (a signal closed it) waits
	// for ever: the store gives up when ctx ends.
	done := make(chan error, 1)
	go func() { done <- s.reset(key) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("emptying the lock's paths on %s: %w", s.node.Name(), ctx.Err())
	}
}

// reset deletes what is left under the lock's paths for key, and creates
// each path the recipes queue under again. A path the last run left as
// the next one needs it is not touched: a queue's path with no child that
// no create has used (its child version still 0, so the next sequence
// number is 0), zk-ephemeral's node absent. Every write costs the
// ensemble a transaction, a failed create's too, and most runs use one
// strategy's path of three.
func (s *zkStore) reset(key string) error {
	for _, name := range strategyNames {
		p := zklock.Path(name, key)
		dir := p
		if name == zklock.EphemeralName {
			dir = p[:strings.LastIndexByte(p, '/')] // the lock is the node itself
		}
		if clean, err := asNew(s.admin, name, p, dir); err != nil {
			return fmt.Errorf("reading %s on %s: %w", p, s.node.Name(), err)
		} else if clean {
			continue
		}
		if err := deleteTree(s.admin, p); err != nil {
			return fmt.Errorf("emptying %s on %s: %w", p, s.node.Name(), err)
		}
		if err := createPath(s.admin, dir); err != nil {
			return fmt.Errorf("creating %s on %s: %w", dir, s.node.Name(), err)
		}
	}
	return nil
}

// asNew reports whether strategy name's lock path p is as reset leaves it:
// zk-ephemeral's node absent and its parent dir present; a queue's path
// present, with no child and a child version of 0.
func asNew(c *zk.Conn, name, p, dir string) (bool, error) {
	ok, st, err := c.Exists(p)
	if err != nil || (name == zklock.EphemeralName && ok) {
		return false, err
	}
	if name == zklock.EphemeralName {
		ok, _, err = c.Exists(dir)
		return ok, err
	}
	return ok && st.NumChildren == 0 && st.Cversion == 0, nil
}

// deleteTree deletes p and every node under it.
func deleteTree(c *zk.Conn, p string) error {
	for try := 1; ; try++ {
		err := deleteOnce(c, p)
		if !errors.Is(err, zk.ErrNotEmpty) || try == 10 {
			return err
		}
		// A node appeared under p meanwhile (a request the last run's
		// client had queued as the run ended, sent as its connection
		// closed): list it again, once it has had time to land.
		time.Sleep(time.Duration(try) * 10 * time.Millisecond)
	}
}

// deleteOnce deletes p and the nodes it lists under it.
func deleteOnce(c *zk.Conn, p string) error {
	children, _, err := c.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ch := range children {
		if err := deleteTree(c, p+"/"+ch); err != nil {
			return err
		}
	}
	if err := c.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// createPath creates p and its parents where they are missing: p first,
// its parents only when it has none, since a create that fails (the node
// exists) is a transaction of the ensemble as one that succeeds.
func createPath(c *zk.Conn, p string) error {
	_, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNoNode) {
		if i := strings.LastIndexByte(p, '/'); i > 0 {
			if err := createPath(c, p[:i]); err != nil {
				return err
			}
		}
		_, err = c.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
	}
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	return nil
}
