// The guarded write of the Scenario.Guarded scenarios on ZooKeeper: a node
// of the resource, written by a multi whose first op checks the holder's
// lock node at the version it was created with (0: no lock writes its
// node's data) and whose second sets the resource's data. ZooKeeper runs
// both or neither. A check compares a node's path and version, nothing
// else: a node created again at the same path passes it too.

package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/strategies/zklock"
)

// What the zookeeper family's locks hand their user that the guarded write
// checks (harness.Driver.Guards), or why they hand nothing.
const (
	guardEphemeral = "the lock node's path (Lease.Token: path#czxid) and its version, 0 as created: a multi's " +
		"check op compares path and version only, and the next holder's node at the same fixed path has " +
		"version 0 too"
	guardRecipe = "the holder's own sequential node (Lease.Token: its path, which no other node ever has) and " +
		"its version, 0 as created: a multi's check op passes only while that node is there"
	unguardedGolib = "go-zookeeper's zk.Lock keeps its node's path to itself (an unexported field) and gives " +
		"its caller nothing else: a multi's check op has no node to name"
)

// resourcePath is the node of key's resource, beside the locks' paths.
func resourcePath(key string) string { return zklock.DefaultRoot + "/resource/" + zklock.Escape(key) }

var _ harness.Guarded = (*zkStore)(nil)

// PrepareGuarded creates the resource node of key, or empties its data,
// outside the schedule.
func (s *zkStore) PrepareGuarded(_ context.Context, key string) error {
	p := resourcePath(key)
	if err := createPath(s.admin, p); err != nil {
		return fmt.Errorf("creating %s on %s: %w", p, s.node.Name(), err)
	}
	if _, err := s.admin.Set(p, []byte("0"), -1); err != nil {
		return fmt.Errorf("setting %s on %s: %w", p, s.node.Name(), err)
	}
	return nil
}

// ReadGuard returns the guard the lease carries: the holder's lock node,
// at version 0. It reads nothing.
func (s *zkStore) ReadGuard(_ context.Context, _ *harness.Client, lease locklab.Lease) (harness.Guard, error) {
	node, _, _ := strings.Cut(lease.Token, "#") // zk-ephemeral's token is path#czxid
	if !strings.HasPrefix(node, "/") {
		return harness.Guard{}, fmt.Errorf("the lease names no lock node (token %q)", lease.Token)
	}
	return harness.Guard{Key: node, Version: 0, Show: s.short(node) + " version 0"}, nil
}

// WriteGuarded sends, on client c's connection, a multi of a check of g's
// node at g's version and a set of the resource's data: a step of c's. A
// check that fails (the node is gone, or has another version) refuses the
// write.
func (s *zkStore) WriteGuarded(_ context.Context, c *harness.Client, g harness.Guard) (harness.Guard, bool, error) {
	conn := s.conn(c)
	if conn == nil {
		return g, false, harness.ErrStopped
	}
	s.mu.Lock()
	p := resourcePath(s.lockKey)
	s.mu.Unlock()
	_, err := conn.Multi(
		&zk.CheckVersionRequest{Path: g.Key, Version: int32(g.Version)},
		&zk.SetDataRequest{Path: p, Data: []byte("c" + strconv.Itoa(c.ID())), Version: -1})
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		return g, false, nil
	case err != nil:
		return g, false, err
	}
	return g, true, nil
}

// conn returns client c's connection in the current run, nil when it has
// none.
func (s *zkStore) conn(c *harness.Client) *zk.Conn {
	s.mu.Lock()
	clients := s.clients
	s.mu.Unlock()
	for _, cl := range clients {
		if cl.step() == c {
			return cl.conn
		}
	}
	return nil
}
