package etcdlock

import (
	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// Sources, as cited by the description.
const (
	srcJepsen      = "Jepsen, \"etcd 3.4.3\" (Kyle Kingsbury, 2020): etcd's locks are leases, and a holder that stops past its lease excludes nobody"
	srcConcurrency = "etcd's Go client, package go.etcd.io/etcd/client/v3/concurrency (Session, Mutex), as etcdctl lock runs it"
)

func init() {
	strategies.MustRegister(strategies.Description{
		Name:    Name,
		Family:  Family,
		Summary: "concurrency.Mutex.TryLock on a session whose lease has the TTL: a key under the lock's prefix, the lowest create revision holds; fence = that revision; release deletes the key and revokes the lease",
		Source:  srcJepsen + "; " + srcConcurrency,
		Weaknesses: []string{
			"a holder paused or partitioned past its lease keeps working while the next holder works: only a resource that checks the fence (the key's create revision) is safe",
			"with Config.Watchdog the holder's process renews the lease: a holder stuck in its work while the process runs keeps the lock for ever",
			"leases have whole seconds: a TTL under 1s is refused, a longer one rounded up, and the server raises one under 1.5 election timeouts",
			"every acquire and release needs a quorum of the cluster: without one, all fail",
		},
		Properties: strategies.Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true, Fencing: true, Extend: true},
		Options:    []string{strategies.OptStore, strategies.OptWatchdog},
	}, func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := NewFromConfig(cfg)
		if err != nil {
			return nil, err
		}
		return l, nil
	})
}
