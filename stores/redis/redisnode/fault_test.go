package redisnode

import (
	"testing"
	"time"

	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/internal/tooling/backends"
)

// Redis's nodes implement the faults of harness/fault: *Node all but
// Failover, *Replicated all; neither the two that harness/stress runs,
// nor a replicated cluster's member loss.
func TestSupports(t *testing.T) {
	t.Parallel()
	for _, f := range fault.All() {
		if f == fault.ClusterFailover || f == fault.LeaderKill || f == fault.MemberLoss {
			// Run by harness/stress on a RedisCluster or an etcd
			// cluster, not by Begin; or on a cluster of members.
			if fault.Supports(&Node{}, f) || fault.Supports((*Replicated)(nil), f) {
				t.Errorf("a node supports %v", f)
			}
			continue
		}
		if !fault.Supports(&Node{}, f) && f != fault.Failover {
			t.Errorf("*Node does not support %v", f)
		}
		if !fault.Supports((*Replicated)(nil), f) {
			t.Errorf("*Replicated does not support %v", f)
		}
	}
}

// Begin and End drive a real node through each fault a stress run injects.
func TestBeginEnd(t *testing.T) {
	t.Parallel()
	n := start(t, Options{Backend: backends.Process, N: 1}).Nodes()[0]
	ctx := ctxT(t)
	for _, f := range []fault.Fault{fault.Pause, fault.Partition, fault.Restart} {
		do(t, n, "SET", "k", "v")
		if err := fault.Begin(ctx, n, f); err != nil {
			t.Fatalf("Begin(%v): %v", f, err)
		}
		if err := reach(n, 300*time.Millisecond); err == nil {
			t.Errorf("the node answers during %v", f)
		}
		if err := fault.End(ctx, n, f); err != nil {
			t.Fatalf("End(%v): %v", f, err)
		}
		if err := reach(n, 5*time.Second); err != nil {
			t.Fatalf("the node does not answer after %v: %v", f, err)
		}
		_, kept := get(t, n, "k")
		if kept != (f != fault.Restart) {
			t.Errorf("after %v the key is kept: %v", f, kept)
		}
	}
}
