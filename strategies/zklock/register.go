package zklock

import (
	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// Sources, as cited by the descriptions.
const (
	srcRecipe    = "ZooKeeper's documentation, \"ZooKeeper Recipes and Solutions\": Locks (with its note on recoverable errors and the GUID, ZOOKEEPER-1262)"
	srcCurator   = "Apache Curator's InterProcessMutex (LockInternals, StandardLockInternalsDriver, protected mode), as it runs the recipe"
	srcPaper     = "Hunt, Konar, Junqueira, Reed, \"ZooKeeper: Wait-free coordination for Internet-scale systems\" (USENIX ATC 2010), 2.4: Simple Locks and their herd effect"
	srcGolib     = "github.com/go-zookeeper/zk v1.0.4, lock.go (zk.NewLock, Lock, Unlock), as shipped"
	srcGolibBugs = "samuel/go-zookeeper#20 (no way to tell a lock was lost) and #229 (a lost answer deadlocks the lock)"
	srcExpiry    = "CURATOR-206 (two clients hold one InterProcessMutex after a partition past the session timeout)"
	srcFencing   = "Martin Kleppmann, \"How to do distributed locking\" (2016): ZooKeeper's zxid as the fencing token"
)

// pausedPast is the weakness every lock here has.
const pausedPast = "a holder paused or cut off past its session timeout loses its node to the session's expiry and keeps working while the next holder works: only a resource that checks the fence (the node's czxid) is safe"

// quorum is the weakness of every lock on an ensemble.
const quorum = "every acquire and release needs a quorum of the ensemble: without one, all fail"

func init() {
	all := strategies.Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true, Fencing: true, Extend: true}
	strategies.MustRegister(strategies.Description{
		Name:    RecipeName,
		Family:  Family,
		Summary: "the Locks recipe as Curator's InterProcessMutex runs it: a protected ephemeral sequential node (_c_<guid>-lock-) under the lock's path, the lowest holds, a waiter watches its predecessor; one attempt deletes its node when not lowest; re-entrant per owner; fence = the node's czxid",
		Source:  srcRecipe + "; " + srcCurator + "; " + srcExpiry + "; " + srcFencing,
		Weaknesses: []string{
			pausedPast + " (CURATOR-206)",
			"the holder hears of its session's expiry only when its connection reaches a server again, and go-zookeeper then opens a new session on its own: Extend or Release tells, nothing else does",
			"a re-entry, and a release that leaves entries, ask nothing of the server, as in Curator: they succeed on a hold the session has lost",
			quorum,
		},
		Properties: all,
		Options:    []string{strategies.OptStore},
	}, func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := NewRecipeFromConfig(cfg)
		if err != nil {
			return nil, err
		}
		return l, nil
	})
	strategies.MustRegister(strategies.Description{
		Name:    EphemeralName,
		Family:  Family,
		Summary: "one ephemeral node at the lock's path, created or refused; a waiter watches that node with exists(), so a release wakes every waiter (the herd effect); fence = the node's czxid; release reads the czxid, then deletes by version",
		Source:  srcPaper + "; " + srcRecipe + "; " + srcFencing,
		Weaknesses: []string{
			"every waiter watches the one node: a release wakes them all, and each sends a create that all but one lose and sets its watch again, so a release costs requests in proportion to the waiters",
			"a create whose answer is lost leaves the node held by a session whose client does not know it: every attempt, the client's own included, is refused until the session ends (ZOOKEEPER-1262, unprotected)",
			pausedPast,
			quorum,
		},
		Properties:     all,
		Options:        []string{strategies.OptStore},
		BrokenByDesign: "release reads the node's czxid, then deletes by version: a holder paused past its session timeout between the two deletes its successor's node, whose version is the same, and lets a third client in",
	}, func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := NewEphemeralFromConfig(cfg)
		if err != nil {
			return nil, err
		}
		return l, nil
	})
	strategies.MustRegister(strategies.Description{
		Name:    GolibName,
		Family:  Family,
		Summary: "go-zookeeper's zk.NewLock as shipped: Lock blocks until its protected ephemeral sequential node is the lowest (Acquire waits for it a patience, 1s by default, or while ctx lasts), Unlock deletes it; no fence, no extend",
		Source:  srcGolib + "; " + srcGolibBugs + "; " + srcRecipe,
		Weaknesses: []string{
			"it never learns that its lock was lost: after the session's expiry go-zookeeper's connection opens a new session on its own, the next waiter holds the lock, and the holder hears of it only when its Release finds no node (samuel/go-zookeeper#20)",
			"a connection lost after the create, while Lock reads the children or watches, returns the error without the node, which stays in the queue with the live session: every later Lock waits behind it until the process ends (samuel/go-zookeeper#229)",
			"Lock cannot be called back: an Acquire that gives up leaves its node queued and a goroutine waiting, which unlocks when its turn comes",
			"a holder paused or cut off past its session timeout loses its node to the session's expiry and keeps working while the next holder works, with no fence to offer a resource: zk.Lock tells its caller neither its node nor a zxid",
			quorum,
		},
		Properties: strategies.Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true},
		Options:    []string{strategies.OptStore},
	}, func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := NewGolibFromConfig(cfg)
		if err != nil {
			return nil, err
		}
		return l, nil
	})
}
