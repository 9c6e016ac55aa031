package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/harnesstest"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
	"github.com/locklab/locklab/strategies/etcdlock"
)

// storySchedule is waiter-lease-expires as its story tells it on etcd:
// c1 holds, c2 queues and waits on a watch, pauses past its lease's TTL
// while c1's keepalive runs, resumes; c1 releases, c2's watch fires, and
// c1 takes the lock again.
const storySchedule = "c1 c1 c2 c2 c2 pause(c2) time resume(c2) c1 c1 c2 c2 c1 c1 c1"

// TestEtcdMutexStore: etcd-mutex, Mutex.Lock on a kept-alive session, on
// a real cluster, each request a step and each wait on a watch a wait of
// the scheduler's: a holder paused or cut off past its lease works beside
// its successor unless the resource checks the fence; contention and a
// crashed holder are safe; a waiter whose lease runs out while it waits
// is told so (ErrSessionExpired).
func TestEtcdMutexStore(t *testing.T) {
	if testing.Short() {
		t.Skip("explores schedules on etcd")
	}
	cl := etcdtest.Start(t, etcdproc.Options{})
	nodes := []harness.Node{NewNode("n1", cl)}
	for _, tc := range []struct {
		scenario string
		want     harness.Outcome
	}{
		{"stale-recovery", harness.Safe},
		{"crash-before-expire", harness.Safe},
		{"pause-past-ttl", harness.Violated},
		{"pause-past-ttl-fenced", harness.Safe},
		{"partitioned-holder", harness.Violated},
		{"waiter-lease-expires", harness.Safe},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			cs := harnesstest.Case(t, tc.scenario, etcdlock.MutexName)
			max := 150
			if tc.want != harness.Safe {
				max = 3000
			}
			res, err := harness.Explore(context.Background(), harness.ExploreOptions{Case: cs, Nodes: nodes, MaxSchedules: max,
				StopAtFirst: tc.want != harness.Safe})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.want {
				msg := ""
				if res.Counterexample != nil {
					for _, e := range res.Counterexample.Events {
						msg += fmt.Sprintf("%d %s %v -> %s %v %v\n", e.Step, e.Label, e.Command, e.Reply, e.Keys, e.Notes)
					}
				}
				t.Fatalf("%s: %s after %d schedules, want %s\n%s", tc.scenario, res.Outcome, res.Schedules, tc.want, msg)
			}
			t.Logf("%s after %d schedules (complete %v)", res.Outcome, res.Schedules, res.Complete)
		})
	}
}

// TestEtcdMutexWaiterLeaseExpires: the story's schedule. c2 waits on its
// watch (no step of its runs until c1's release deletes the key it
// watches), its lease runs out while it is paused and c1's, kept alive,
// does not; after the wait Mutex.Lock reads c2's key back and fails, and
// c1 takes the lock again on the same session.
func TestEtcdMutexWaiterLeaseExpires(t *testing.T) {
	cl := etcdtest.Start(t, etcdproc.Options{})
	nodes := []harness.Node{NewNode("n1", cl)}
	h, err := harness.Run(context.Background(), harness.RunOptions{Case: harnesstest.Case(t, "waiter-lease-expires", etcdlock.MutexName),
		Nodes: nodes, Schedule: storySchedule})
	if err != nil {
		t.Fatal(err)
	}
	if h.Verdict.Outcome != harness.Safe || h.Schedule != storySchedule {
		t.Fatalf("%v: %s", h.Verdict, h.Schedule)
	}
	for _, note := range []string{"c2 waits for the delete of P/L1 (a watch)", "c2 refused", "c1 acquired (fence"} {
		if !harnesstest.Noted(h, note) {
			t.Errorf("no note %q in %s", note, h.Schedule)
		}
	}
	acquired := 0
	for _, a := range h.Acquisitions {
		if a.Client == 2 {
			t.Errorf("c2 acquired: %+v", a)
		}
		acquired++
	}
	if acquired != 2 {
		t.Errorf("c1 acquired %d times, want 2 (its lease kept alive through the time step)", acquired)
	}
}

// TestEtcdMutexOldLockViolates: the scenario catches the lock Jepsen
// tested, etcd 3.4's Mutex.Lock, which returned once its predecessors were
// gone without reading its own key back: on the story's schedule c2
// returns as a holder on a lease that ran out, and c1's next Lock finds
// its own new key first: two holders.
func TestEtcdMutexOldLockViolates(t *testing.T) {
	cl := etcdtest.Start(t, etcdproc.Options{})
	nodes := []harness.Node{NewNode("n1", cl)}
	sc, err := harness.Lookup("waiter-lease-expires")
	if err != nil {
		t.Fatal(err)
	}
	cs := harness.Custom(sc, "etcd-mutex-3.4", func(cfg locklab.Config) (locklab.Locker, error) {
		return &oldMutex{client: cfg.Store.(*clientv3.Client), clock: cfg.Clock}, nil
	})
	cs.Strategy.Family = etcdlock.Family
	h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes, Schedule: storySchedule})
	if err != nil {
		t.Fatal(err)
	}
	if h.Verdict.Outcome != harness.Violated || h.Verdict.Property != harness.MutualExclusion {
		t.Fatalf("etcd 3.4's Lock: %v, want two holders\n%s", h.Verdict, h.Schedule)
	}
	t.Log(h.Verdict)
}

// oldMutex is etcd 3.4's concurrency.Mutex.Lock (v3.4.3, as Jepsen tested
// it) on a session kept alive: the same requests as today's up to the
// wait, and no read of its own key after it.
type oldMutex struct {
	client  *clientv3.Client
	clock   locklab.Clock
	session *concurrency.Session
}

func (*oldMutex) keepsSessionAlive() {}

func (l *oldMutex) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	if l.session == nil {
		s, err := concurrency.NewSession(l.client, concurrency.WithTTL(int(ttl/time.Second)))
		if err != nil {
			return locklab.Lease{}, err
		}
		l.session = s
	}
	pfx := etcdPrefix(key) + "/"
	myKey := fmt.Sprintf("%s%x", pfx, l.session.Lease())
	resp, err := l.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(myKey), "=", 0)).
		Then(clientv3.OpPut(myKey, "", clientv3.WithLease(l.session.Lease())), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).
		Else(clientv3.OpGet(myKey), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).Commit()
	if err != nil {
		return locklab.Lease{}, err
	}
	myRev := resp.Header.Revision
	if !resp.Succeeded {
		myRev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	owner := resp.Responses[1].GetResponseRange().Kvs
	if len(owner) > 0 && owner[0].CreateRevision != myRev {
		if err := waitDeletes(ctx, l.client, pfx, myRev-1); err != nil {
			l.client.Delete(l.client.Ctx(), myKey)
			return locklab.Lease{}, err
		}
	}
	return locklab.Lease{Key: key, Token: myKey, Fence: myRev, Until: l.clock.Now().Add(ttl * 2 / 3)}, nil
}

func (l *oldMutex) Release(ctx context.Context, lease locklab.Lease) error {
	_, err := l.client.Delete(ctx, lease.Token)
	return err
}

func (l *oldMutex) Close() error {
	if l.session != nil {
		l.session.Orphan()
	}
	return nil
}

// waitDeletes is the client's (concurrency/key.go): a Get of the last key
// created before maxCreateRev, a watch on it until its delete, again.
func waitDeletes(ctx context.Context, client *clientv3.Client, pfx string, maxCreateRev int64) error {
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(maxCreateRev))
	for {
		resp, err := client.Get(ctx, pfx, opts...)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		if err := waitDelete(ctx, client, string(resp.Kvs[0].Key), resp.Header.Revision); err != nil {
			return err
		}
	}
}

func waitDelete(ctx context.Context, client *clientv3.Client, key string, rev int64) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range client.Watch(cctx, key, clientv3.WithRev(rev)) {
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("lost watcher waiting for delete")
}

// TestEtcdMutexWorkersAgree: etcd-mutex's waits are the scheduler's, not
// the machine's: one worker and four run the same schedules to the same
// verdict, crash-before-expire's waiter woken by the time step that runs
// the crashed holder's lease out. -short explores crash-before-expire
// alone.
func TestEtcdMutexWorkersAgree(t *testing.T) {
	cl := etcdtest.Start(t, etcdproc.Options{})
	nodes := []harness.Node{NewNode("n1", cl)}
	scenarios := []string{"crash-before-expire", "pause-past-ttl"}
	if testing.Short() {
		scenarios = scenarios[:1]
	}
	harnesstest.WorkersAgree(t, nodes, etcdlock.MutexName, 2, scenarios...)
}

// TestEtcdMutexLostTxnBlocks: a Txn whose reply is lost fails Mutex.Lock
// without a delete, and its key stays queued on the kept-alive session.
// lost-reply's C1 tries again and finds its own key; a C1 that does not
// (one attempt) leaves C2 waiting behind a key nobody deletes while C1's
// process runs: the lock is never free again.
func TestEtcdMutexLostTxnBlocks(t *testing.T) {
	cl := etcdtest.Start(t, etcdproc.Options{})
	nodes := []harness.Node{NewNode("n1", cl)}
	sc, err := harness.Lookup("lost-reply")
	if err != nil {
		t.Fatal(err)
	}
	once := *sc
	once.Programs = []harness.Program{sc.Programs[1], sc.Programs[1]} // acquire write release, one attempt each
	cs, err := once.Resolve(etcdlock.MutexName)
	if err != nil {
		t.Fatal(err)
	}
	h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes, Schedule: "c1 lose(c1) c1 c2 c2 c2"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Verdict.Outcome != harness.Deadlock || !harnesstest.Noted(h, "c1 acquire failed") || !harnesstest.Noted(h, "c2 waits for the delete of P/L1") {
		t.Fatalf("%v\n%s", h.Verdict, h.Schedule)
	}
	t.Log(h.Verdict)
}
