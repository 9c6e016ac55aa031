// Renewal as etcd-lease's users get it (harness.Renewer): the run renews
// the holders' leases outside the schedule, on the store's own client, and
// moves their expiry on the run's clock.

package etcd

import (
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
)

var _ harness.Renewer = (*etcdStore)(nil)

// Unscheduled gives cfg the store's admin client.
func (s *etcdStore) Unscheduled(cfg *locklab.Config) { cfg.Store = s.admin }

// Renewed moves the expiry of lease's etcd lease on the run's clock to a
// whole TTL from now, as the keepalive that went through did on the
// leader's.
func (s *etcdStore) Renewed(lease locklab.Lease) {
	i := strings.LastIndexByte(lease.Token, '/')
	id, err := strconv.ParseInt(lease.Token[i+1:], 16, 64)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.leases[clientv3.LeaseID(id)]; ok {
		s.leases[clientv3.LeaseID(id)] = s.now + s.leaseTTL[clientv3.LeaseID(id)]
	}
}
