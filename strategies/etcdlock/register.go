package etcdlock

import (
	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// Sources, as cited by the description.
const (
	srcJepsen      = "Jepsen, \"etcd 3.4.3\" (Kyle Kingsbury, 2020): etcd's locks are leases, and a holder that stops past its lease excludes nobody"
	srcConcurrency = "etcd's Go client, package go.etcd.io/etcd/client/v3/concurrency (Session, Mutex), as etcdctl lock runs it"
	srcMutex       = "etcd's Go client v3.7.2, concurrency/mutex.go and key.go (Mutex.Lock, waitDeletes: a watch on the last key created before its own; its own key read back, ErrSessionExpired) and session.go (NewSession, KeepAlive); etcd's v3lock API (Lock, Unlock) runs the same"
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
	strategies.MustRegister(strategies.Description{
		Name:    MutexName,
		Family:  Family,
		Summary: "concurrency.Mutex.Lock on the process's Session, kept alive by the client's keepalive: a key under the lock's prefix, a waiter watches the key created before its own until it is deleted, then reads its own back; Acquire waits a patience (1s by default); release is Mutex.Unlock, a blind delete of its key",
		Source:  srcMutex + "; " + srcJepsen,
		Weaknesses: []string{
			"a holder paused or partitioned past its session's TTL keeps working while the next holder works: Mutex says nothing unless its user watches Session.Done or hands the key's create revision (the fence) to a resource that checks it",
			"the keepalive renews the lease for as long as the process runs: a holder stuck in its work keeps the lock for ever",
			"Unlock deletes its key without a compare and returns nil after the lock was lost: release says nothing of the loss",
			"a waiter whose lease expires while it waits waits on until its predecessor goes, then fails with ErrSessionExpired",
			"a Txn whose reply is lost fails Lock and leaves its key queued on the kept-alive session: the others wait behind it until the process locks again on the session or ends it",
			"every acquire and release needs a quorum of the cluster: without one, all fail",
		},
		Properties: strategies.Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true, Fencing: true},
		Options:    []string{strategies.OptStore},
	}, func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := NewMutexFromConfig(cfg)
		if err != nil {
			return nil, err
		}
		return l, nil
	})
}
