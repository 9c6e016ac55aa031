// The guarded write of the Scenario.Guarded scenarios on etcd: a key of
// the resource beside the lock's, written by a Txn that puts it only if
// the holder's lock key still has the create revision it had when the
// lock was taken, as etcd's v3lock API says its lock key is to be used
// ("in conjunction with transactions to safely ensure updates to etcd
// only occur while holding lock ownership").

package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
)

// guardWhat is what both etcd locks hand their user that the guarded
// write checks (harness.Driver.Guards).
const guardWhat = "the lock key under the lock's prefix (Lease.Token: concurrency.Mutex.Key) and its create " +
	"revision (Lease.Fence: the Mutex's Header().Revision, the owner's create revision): a Txn that compares " +
	"create(key) = revision succeeds only while that key is there, as it was created"

// resourcePrefix is where the resources of the guarded writes live, apart
// from every lock's prefix.
const resourcePrefix = "locklab-resource/"

var _ harness.Guarded = (*etcdStore)(nil)

// PrepareGuarded puts the resource of key afresh, outside the schedule.
func (s *etcdStore) PrepareGuarded(ctx context.Context, key string) error {
	if _, err := s.admin.Put(ctx, resourcePrefix+key, "0"); err != nil {
		return fmt.Errorf("putting the resource on %s: %w", s.node.Name(), err)
	}
	s.mu.Lock()
	if s.resources == nil {
		s.resources = map[string]bool{}
	}
	s.resources[resourcePrefix+key] = true
	s.mu.Unlock()
	return nil
}

// ReadGuard returns the guard the lease carries: the holder's lock key
// and its create revision. It reads nothing.
func (s *etcdStore) ReadGuard(_ context.Context, _ *harness.Client, lease locklab.Lease) (harness.Guard, error) {
	if lease.Token == "" || lease.Fence <= 0 {
		return harness.Guard{}, fmt.Errorf("the lease names no lock key and revision (token %q, fence %d)", lease.Token, lease.Fence)
	}
	return harness.Guard{Key: lease.Token, Version: lease.Fence,
		Show: "create revision " + strconv.FormatInt(lease.Fence, 10)}, nil
}

// WriteGuarded puts the resource with client c's etcd client, in a Txn
// that compares the lock key's create revision with g's: a step of c's.
// It reports whether the Txn's success branch ran.
func (s *etcdStore) WriteGuarded(ctx context.Context, c *harness.Client, g harness.Guard) (harness.Guard, bool, error) {
	cli := s.client(c)
	if cli == nil {
		return g, false, harness.ErrStopped
	}
	s.mu.Lock()
	key := resourcePrefix + s.lockKey
	s.mu.Unlock()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(g.Key), "=", g.Version)).
		Then(clientv3.OpPut(key, "c"+strconv.Itoa(c.ID()))).
		Commit()
	if err != nil {
		return g, false, err
	}
	return g, resp.Succeeded, nil
}

// client returns client c's etcd client in the current run, nil when it
// has none.
func (s *etcdStore) client(c *harness.Client) *clientv3.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ec := range s.clients {
		if ec.gate.bound() == c {
			return ec.cli
		}
	}
	return nil
}

// deleteResources deletes the resources the guarded writes wrote.
func (s *etcdStore) deleteResources(ctx context.Context) error {
	s.mu.Lock()
	keys := s.resources
	s.resources = nil
	s.mu.Unlock()
	var errs []error
	for k := range keys {
		if _, err := s.admin.Delete(ctx, k); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
