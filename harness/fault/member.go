// The member-loss fault of a replicated cluster that is one node of the
// harness (an etcd cluster, a ZooKeeper ensemble): a follower lags, and
// then another member comes back with an emptied data directory while the
// leader, the one other member with the latest writes, is down.

package fault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// MemberWipe is the fault MemberLoss of a cluster of three members: Lag
// kills a follower, A, which misses the writes that follow, acknowledged
// by the other two, B and C. Wipe kills C (a follower), then B (the
// leader), starts C again on an emptied data directory (StartEmpty),
// then A on its own, and last B on its own: A and C are a quorum that
// never saw those writes, and B, back, is told by their leader what the
// log holds. Recover, after the run, starts every member afresh on
// emptied data directories (Reset) when Wipe struck, or starts A again
// when only Lag did: the next run starts on a whole cluster with one
// history. It implements MemberLoser and Noter for the node that embeds
// it.
type MemberWipe[M Member] struct {
	// Quorum finds the leader and waits for the cluster's health.
	Quorum Quorum[M]
	// Members lists the cluster's members.
	Members func() []M
	// StartEmpty starts m again on an emptied data directory and returns
	// once the others may be started: m has come up without a peer to
	// ask about the cluster (an etcd member asks its peers whether it was
	// bootstrapped before, and refuses to start where one answers). done
	// gives the end of m's start, once it serves or has failed.
	StartEmpty func(ctx context.Context, m M) (done <-chan error, err error)
	// Reset kills every member and starts them all afresh on emptied data
	// directories, as a new cluster, and returns once it serves.
	Reset func(ctx context.Context) error
	// RejoinWait bounds the wait for the leader that Wipe killed to serve
	// again once started (0: as long as ctx lasts): a member that does
	// not is left down.
	RejoinWait time.Duration

	mu      sync.Mutex
	lagging M      // the member Lag killed
	wiped   bool   // Wipe struck since the last Recover
	note    string // what the last step did (Note)
}

// Lag kills a follower (SIGKILL): it misses every write until Wipe. It
// is the last follower in the cluster's order, never the first member
// when another follower runs: a run's clients are served by the first
// server that answers them (ZooKeeper's store pins them there), so the
// lag leaves them where they were, whichever member leads, and a
// schedule's steps are the same each time it runs.
func (l *MemberWipe[M]) Lag(ctx context.Context) error {
	leader, err := l.Quorum.Leader(ctx)
	if err != nil {
		return err
	}
	var none M
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lagging != none {
		return fmt.Errorf("member loss: %s lags already", l.lagging)
	}
	members := l.Members()
	for i := len(members) - 1; i >= 0; i-- {
		if m := members[i]; m != leader && m.Running() {
			m.Kill()
			l.lagging = m
			l.note = "A, a follower, is killed: it lags"
			return nil
		}
	}
	return fmt.Errorf("member loss: no follower of %s runs", leader)
}

// Wipe kills C, a follower, then B, the leader, both of which have the
// writes A missed; starts C again on an emptied data directory, with no
// peer running to ask; starts A again on its data directory, which with
// C is a quorum; and then B on its own. B may fail to rejoin within
// RejoinWait (an etcd member that had recorded entries committed beyond
// the new leader's log): it is then left down, and Note says so.
func (l *MemberWipe[M]) Wipe(ctx context.Context) error {
	var none M
	l.mu.Lock()
	a := l.lagging
	l.mu.Unlock()
	if a == none {
		return errors.New("member loss: wipe without a lagging member (lag first)")
	}
	b, err := l.Quorum.Leader(ctx)
	if err != nil {
		return err
	}
	var c M
	for _, m := range l.Members() {
		if m != a && m != b && m.Running() {
			c = m
		}
	}
	if c == none {
		return fmt.Errorf("member loss: no follower of %s runs besides %s", b, a)
	}
	l.mu.Lock()
	l.wiped = true
	l.mu.Unlock()
	c.Kill()
	b.Kill()
	done, err := l.StartEmpty(ctx, c)
	if err != nil {
		return fmt.Errorf("starting %s emptied: %w", c, err)
	}
	if err := a.Restart(ctx); err != nil {
		return fmt.Errorf("starting %s, which lagged, beside %s emptied: %w", a, c, err)
	}
	if err := <-done; err != nil {
		return fmt.Errorf("starting %s emptied: %w", c, err)
	}
	leader, err := l.Quorum.Leader(ctx)
	if err != nil {
		return err
	}
	// The notes name the members by their parts in the story, A, B and
	// C: which member leads after a cluster's start varies from run to
	// run, and a timeline says the same each time.
	role := map[M]string{a: "A", b: "B", c: "C"}
	leads, ok := role[leader]
	if !ok {
		leads = leader.String()
	}
	notes := []string{"C, the other follower, and B, the leader, are killed; C starts with an emptied data directory, " +
		"then A, which lagged: " + leads + " leads"}
	bctx, cancel := ctx, context.CancelFunc(func() {})
	if l.RejoinWait > 0 {
		bctx, cancel = context.WithTimeout(ctx, l.RejoinWait)
	}
	err = b.Restart(bctx)
	cancel()
	if err != nil {
		b.Kill()
		within := ""
		if l.RejoinWait > 0 {
			within = " within " + l.RejoinWait.String()
		}
		notes = append(notes, "B does not rejoin"+within+", and is left down")
	} else {
		notes = append(notes, "B rejoins")
	}
	l.mu.Lock()
	l.note = strings.Join(notes, "; ")
	l.mu.Unlock()
	return l.Quorum.WaitHealthy(ctx)
}

// Note returns what the last Lag or Wipe did, once.
func (l *MemberWipe[M]) Note() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.note
	l.note = ""
	return n
}

// Recover leaves the cluster whole and of one history for the next run:
// after a Wipe, every member is started afresh on an emptied data
// directory (Reset); after a Lag alone, the lagging member is started
// again on its data directory and catches up. It reports whether it
// reset the cluster.
func (l *MemberWipe[M]) Recover(ctx context.Context) (reset bool, err error) {
	var none M
	l.mu.Lock()
	a, wiped := l.lagging, l.wiped
	l.mu.Unlock()
	switch {
	case wiped:
		if err := l.Reset(ctx); err != nil {
			return false, fmt.Errorf("starting the cluster afresh after a member lost its data: %w", err)
		}
		reset = true
	case a != none && !a.Running():
		if err := a.Restart(ctx); err != nil {
			return false, fmt.Errorf("starting %s, which lagged, again: %w", a, err)
		}
		if err := l.Quorum.WaitHealthy(ctx); err != nil {
			return false, err
		}
	}
	l.mu.Lock()
	l.lagging, l.wiped, l.note = none, false, ""
	l.mu.Unlock()
	return reset, nil
}
