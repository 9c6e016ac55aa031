package strategies

import (
	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies/incr_expire"
	"github.com/locklab/locklab/strategies/redlock"
	"github.com/locklab/locklab/strategies/reentrant"
	"github.com/locklab/locklab/strategies/setnx_getset"
	"github.com/locklab/locklab/strategies/setnxex"
)

// Family names.
const (
	FamilySetNXGetSet = "setnx_getset"
	FamilyIncrExpire  = "incr_expire"
	FamilySetNXEx     = "setnxex"
	FamilyRedlock     = "redlock"
	FamilyReentrant   = "reentrant"
)

// Sources, as cited by Description.Source: each article by its title and
// its author or site.
const (
	srcSurvey     = "an anonymous Chinese survey of Redis lock designs, republished from WizNote"
	srcSetNXPage  = "Redis docs, SETNX command page, \"Design pattern: Locking with SETNX\" (withdrawn there and from huangz's Chinese translation, redisdoc)"
	srcTornado    = srcSetNXPage + "; release as in the tornado-redis Lock quoted in " + srcSurvey
	srcIncrBlog   = "blog post \"Redis实现分布式全局锁\" as summarized in " + srcSurvey + " (INCR + EXPIRE)"
	srcSetPage    = "Redis docs, SET command page, pattern with NX and EX plus a random token"
	srcYjf        = "葉劍峰 (yjf512), \"解鎖redis鎖的正確姿勢\", cnblogs"
	srcJedis      = "\"實現分布式鎖的必要條件\", an article on jedis locks"
	srcLockNotes  = "the notes \"分布式锁 Distributed Lock\""
	srcRemedy     = srcSetNXPage + ", its remedy for the release (\"解决方案\": check that the lock has not expired, then GET and DEL in one EVAL), as quoted in " + srcSurvey
	srcForever    = "the tornado-redis Lock without lock_ttl (LOCK_FOREVER = float(2 ** 31 + 1), \"1 past max unix time\") quoted in " + srcSurvey
	srcPHPAlways  = "the PHP form \"$redis->setNX($key, $value); $redis->expire($key, $ttl);\" quoted in " + srcSurvey
	srcSetNXPHP   = srcYjf + " (SETNX + EXPIRE, then SET NX EX with DEL), and " + srcJedis + " (setnx + expire)"
	srcGetThenDel = srcJedis + " (GET, compare the value, then DEL), and the PHP loop in " + srcSurvey
	srcRedisson   = srcLockNotes + " (section 1.4, Redisson: Lua scripts, re-entry by incrby and decrement at unlock, a 30 s lock renewed every 10 s by a watch dog, waiters subscribe to the unlock message)"
	srcWait       = "Redis docs, WAIT command page (\"WAIT does not make Redis a strongly consistent store\"), and \"Distributed locks with Redis\" (\"Why failover-based implementations are not enough\"); the lock is set-nx-px's"
	srcRedlock    = "Redis docs, \"Distributed locks with Redis\" (the Redlock algorithm); " + srcLockNotes + "; critique: Kleppmann, \"How to do distributed locking\", and antirez, \"Is Redlock safe?\""
)

// wrap adapts a family constructor to a Factory.
func wrap[T locklab.Locker](f func(locklab.Config) (T, error)) Factory {
	return func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := f(cfg)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// init registers the built-in Redis strategies, family by family.
func init() {
	registerSetNXGetSet()
	registerIncrExpire()
	registerSetNXEx()
	registerReentrant()
	registerRedlock()
}

// registerSetNXGetSet registers the strategies whose lock is a
// client-written expiry stamp: SETNX, then DEL or GETSET on a stale one.
func registerSetNXGetSet() {
	MustRegister(Description{
		Name:    "setnx-del",
		Family:  FamilySetNXGetSet,
		Summary: "SETNX key <unix ms + ttl + 1>; a stale stamp is recovered with DEL + SETNX; release DEL",
		Source:  srcSetNXPage,
		Weaknesses: []string{
			"two clients that both see a stale stamp both DEL and SETNX and both hold the lock (C1/C2)",
			"expiry is a client-written timestamp: a client whose clock runs ahead takes a live lock",
			"release is a blind DEL: a holder past its deadline deletes its successor's lock",
		},
		BrokenByDesign: "two clients that both find the stamp stale both DEL and SETNX, and both hold the lock",
		Properties:     Properties{AtomicAcquire: true},
	}, wrap(setnx_getset.NewSetNXDel))

	MustRegister(Description{
		Name:    "setnx-getset",
		Family:  FamilySetNXGetSet,
		Summary: "SETNX key <unix ms + ttl + 1>; a stale stamp is recovered with GETSET (C4/C5); release GET, compare, DEL",
		Source:  srcTornado,
		Weaknesses: []string{
			"expiry is a client-written timestamp: a client whose clock runs ahead takes a live lock",
			"a holder past its deadline reads its successor's later stamp at release and deletes that lock",
			"a losing GETSET still overwrites the winner's stamp, so stamps drift from what holders think",
		},
		BrokenByDesign: "a holder past its deadline reads its successor's later stamp at release and deletes that lock",
		Properties:     Properties{AtomicAcquire: true},
	}, wrap(setnx_getset.NewSetNXGetSet))

	MustRegister(Description{
		Name:    "setnx-getset-lua",
		Family:  FamilySetNXGetSet,
		Summary: "setnx-getset's acquire; release checks the holder's own stamp has not passed, then GET, compare, DEL in one Lua script",
		Source:  srcRemedy,
		Weaknesses: []string{
			"expiry is a client-written timestamp: a client whose clock runs ahead takes a live lock",
			"a losing GETSET overwrites the winner's stamp: the winner's release then finds a stamp not its own and the lock waits out its expiry",
		},
		BrokenByDesign: "expiry is a client-written timestamp: a client whose clock runs ahead finds a live lock stale and takes it",
		Properties:     Properties{AtomicAcquire: true, OwnerCheckedRelease: true},
	}, wrap(setnx_getset.NewSetNXGetSetLua))

	MustRegister(Description{
		Name:    "setnx-forever",
		Family:  FamilySetNXGetSet,
		Summary: "tornado-redis's Lock without a TTL: SETNX key LOCK_FOREVER (2**31+1 s); release GET, compare, DEL",
		Source:  srcForever,
		Weaknesses: []string{
			"the lock never expires: a holder that crashes before its release locks everyone out for ever (deadlock)",
			"release is GET then DEL, two commands, as in setnx-getset",
		},
		BrokenByDesign: "the lock never expires: a holder that crashes before its release locks everyone out for ever",
		Properties:     Properties{AtomicAcquire: true},
		NoExpiry:       true,
	}, wrap(setnx_getset.NewSetNXForever))
}

// registerIncrExpire registers the INCR-based strategies: INCR wins at 1,
// the TTL set by a second command, a script or a transaction.
func registerIncrExpire() {
	MustRegister(Description{
		Name:    "incr-expire",
		Family:  FamilyIncrExpire,
		Summary: "INCR key == 1 wins, then EXPIRE as a second command; release DEL",
		Source:  srcIncrBlog,
		Weaknesses: []string{
			"a crash between INCR and EXPIRE leaves a key without TTL: nobody ever acquires again (deadlock)",
			"release is a blind DEL: a holder past its TTL deletes its successor's lock",
		},
		BrokenByDesign: "a client that crashes between INCR and EXPIRE leaves a key without TTL, and nobody ever acquires again",
		Properties:     Properties{AtomicAcquire: true, ServerTTL: true},
	}, wrap(incr_expire.NewIncrExpire))

	MustRegister(Description{
		Name:    "incr-expire-lua",
		Family:  FamilyIncrExpire,
		Summary: "INCR and PEXPIRE (only when INCR returned 1) in one Lua script; release DEL",
		Source:  srcIncrBlog + ", Lua version",
		Weaknesses: []string{
			"release is a blind DEL: a holder past its TTL deletes its successor's lock",
		},
		BrokenByDesign: "release is a blind DEL: a holder past its TTL deletes its successor's lock and lets a third client in",
		Properties:     Properties{AtomicAcquire: true, ServerTTL: true},
	}, wrap(incr_expire.NewIncrExpireLua))

	MustRegister(Description{
		Name:    "incr-expire-multi",
		Family:  FamilyIncrExpire,
		Summary: "MULTI, INCR, EXPIRE, EXEC: the EXPIRE runs on every try; release DEL",
		Source:  srcIncrBlog + ", MULTI/EXEC version for servers without EVAL",
		Weaknesses: []string{
			"every failed try pushes the TTL forward: a crashed holder's lock lives as long as others keep trying (starvation)",
			"release is a blind DEL: a holder past its TTL deletes its successor's lock",
		},
		BrokenByDesign: "every failed try pushes the TTL forward, so a crashed holder's lock lives as long as others keep trying",
		Properties:     Properties{AtomicAcquire: true, ServerTTL: true},
	}, wrap(incr_expire.NewIncrExpireMulti))
}

// registerSetNXEx registers the strategies of a key set with a token:
// SETNX then EXPIRE, or SET NX PX, with each form of release.
func registerSetNXEx() {
	MustRegister(Description{
		Name:    "setnx-expire",
		Family:  FamilySetNXEx,
		Summary: "SETNX key token, then EXPIRE as a second command; release DEL",
		Source:  srcSetNXPHP,
		Weaknesses: []string{
			"a crash between SETNX and EXPIRE leaves a key without TTL: nobody ever acquires again (deadlock)",
			"release is a blind DEL: a holder past its TTL deletes its successor's lock",
		},
		BrokenByDesign: "a client that crashes between SETNX and EXPIRE leaves a key without TTL, and nobody ever acquires again",
		Properties:     Properties{AtomicAcquire: true, ServerTTL: true},
	}, wrap(setnxex.NewSetNXExpire))

	MustRegister(Description{
		Name:    "setnx-expire-always",
		Family:  FamilySetNXEx,
		Summary: "SETNX key token, then EXPIRE after every SETNX, a failed one too; release DEL",
		Source:  srcPHPAlways,
		Weaknesses: []string{
			"every failed try pushes the TTL forward: a crashed holder's lock lives as long as others keep trying (starvation)",
			"a crash between SETNX and EXPIRE leaves a key without TTL until the next refused try's EXPIRE gives it one: the lock is lost for a TTL, not for ever",
			"release is a blind DEL: a holder past its TTL deletes its successor's lock",
		},
		BrokenByDesign: "every failed try pushes the TTL forward, so a crashed holder's lock lives as long as others keep trying",
		Properties:     Properties{AtomicAcquire: true, ServerTTL: true},
	}, wrap(setnxex.NewSetNXExpireAlways))

	MustRegister(Description{
		Name:    "set-nx-px-del",
		Family:  FamilySetNXEx,
		Summary: "SET key token NX PX ttl; release blind DEL",
		Source:  srcSetNXPHP,
		Weaknesses: []string{
			"release is a blind DEL: a holder past its TTL deletes its successor's lock",
		},
		BrokenByDesign: "release is a blind DEL: a holder past its TTL deletes its successor's lock and lets a third client in",
		Properties:     Properties{AtomicAcquire: true, ServerTTL: true},
	}, wrap(setnxex.NewSetNXPXDel))

	MustRegister(Description{
		Name:    "set-nx-px-getdel",
		Family:  FamilySetNXEx,
		Summary: "SET key token NX PX ttl; release GET, compare the token, DEL (two commands)",
		Source:  srcGetThenDel,
		Weaknesses: []string{
			"check-then-act: the key can expire and be taken between the GET and the DEL, which then deletes the successor's lock",
		},
		BrokenByDesign: "the key can expire and be taken between release's GET and DEL, which then deletes the successor's lock",
		Properties:     Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true},
	}, wrap(setnxex.NewSetNXPXGetDel))

	MustRegister(Description{
		Name:    "set-nx-px",
		Family:  FamilySetNXEx,
		Summary: "SET key token NX PX ttl + INCR of the key's own fence counter (in its hash slot) in one script; release Lua compare-and-delete",
		Source:  srcSetPage + "; compare-and-delete script in " + srcSurvey + ", in " + srcYjf + " and in " + srcLockNotes + "; fencing after Kleppmann, \"How to do distributed locking\"",
		Weaknesses: []string{
			"a holder paused past its TTL keeps acting while a successor holds the lock: only a resource that checks the fence number is safe",
			"one node: a restart without persistence, or a failover to a replica that missed the write, loses the lock",
		},
		Properties: Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true, Fencing: true, Extend: true},
		Options:    []string{OptNotify, OptWatchdog},
	}, wrap(setnxex.NewSetNXPX))

	MustRegister(Description{
		Name:    "set-nx-px-wait",
		Family:  FamilySetNXEx,
		Summary: "set-nx-px, then WAIT 1 for a replica to acknowledge the key; unacknowledged, the acquire deletes it and fails",
		Source:  srcWait,
		Weaknesses: []string{
			"a failover to a replica that did not acknowledge (WAIT 1 of several names none), or a master restarted without persistence, still loses the lock",
			"a holder paused past its TTL keeps acting while a successor holds the lock: only a resource that checks the fence number is safe",
			"every acquire fails while no replica answers: availability is traded for the acknowledgement",
		},
		Properties: Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true, Fencing: true},
		Replica:    true,
	}, wrap(setnxex.NewSetNXPXWait))
}

// registerReentrant registers Redisson's re-entrant hash lock.
func registerReentrant() {
	MustRegister(Description{
		Name:    "hash-reentrant",
		Family:  FamilyReentrant,
		Summary: "Redisson's lock with Redisson's defaults: a hash per key, the holder's id:owner as field and its entry count (HINCRBY), PEXPIRE; a partial release renews the TTL, the last deletes and publishes; a watchdog extends every TTL/3 unless Config.NoWatchdog",
		Source:  srcRedisson,
		Weaknesses: []string{
			"a holder paused past its TTL keeps acting while a successor holds the lock: its watchdog pauses with it, and the lease has no fence number",
			"one node: a restart without persistence, or a failover to a replica that missed the write, loses the lock",
			"a holder stuck in its work while its process runs keeps the lock for ever: the watchdog renews it as long as the process lives",
		},
		Properties: Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true, Extend: true},
		Options:    []string{OptNotify, OptWatchdog, OptNoWatchdog},
	}, wrap(reentrant.New))
}

// registerRedlock registers Redlock on N independent masters.
func registerRedlock() {
	MustRegister(Description{
		Name:    "redlock",
		Family:  FamilyRedlock,
		Summary: "N independent masters: parallel SET NX PX, majority N/2+1, validity = ttl - elapsed - (drift*ttl + 2ms); Lua compare-and-delete on every node",
		Source:  srcRedlock,
		Weaknesses: []string{
			"a node restarted without persistence forgets the key: a second client wins a majority while the first still holds a valid lease",
			"a node failed over to an asynchronous replica that missed the key forgets it the same way",
			"a clock jump on a node expires the key early there, letting a second client take a majority",
			"a client paused past its validity keeps acting on an expired lock, and with fence 0 the resource cannot refuse it",
			"concurrent attempts can split the votes so that nobody wins; callers retry after a random delay",
		},
		Properties: Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true, Extend: true, MultiNode: true},
		Options:    []string{OptDriftFactor, OptNodeTimeout},
	}, wrap(redlock.New))
}
