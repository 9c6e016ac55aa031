package etcd

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/harnesstest"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
)

// TestEtcdTouches: every request etcd-lease sends in the scenarios that
// take, refuse, release and lose its lock is declared with what it reads
// and writes, on a real cluster; and a schedule run again, which the
// server gives other lease IDs, declares the same names.
func TestEtcdTouches(t *testing.T) {
	cl := etcdtest.Start(t, etcdproc.Options{})
	nodes := []harness.Node{NewNode("n1", cl)}
	seen := map[string]bool{}
	var first []*harness.Touch
	for _, tc := range []struct{ scenario, schedule string }{
		{"pause-past-ttl", ""},
		{"release-after-expiry", ""},
		// c2's acquire while c1 holds: its key is deleted, its lease
		// revoked; then c1 releases.
		{"stale-recovery", ""},
		// The same schedule once more: other lease IDs, the same names.
		{"stale-recovery", ""},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		h, err := harness.Run(ctx, harness.RunOptions{Case: harnesstest.Case(t, tc.scenario, "etcd-lease"), Nodes: nodes, Schedule: tc.schedule})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var touched []*harness.Touch
		for _, e := range h.Events {
			if e.Client == 0 || e.Node == 0 {
				continue // a time step or fault, a local step
			}
			touched = append(touched, e.Touch)
			if len(e.Command) > 0 {
				method, _, _ := strings.Cut(e.Command[0], " ")
				seen[method] = true
			}
			if e.Touch == nil {
				t.Errorf("%s: step %d (%s %v) declares nothing\n%s", tc.scenario, e.Step, e.Label, e.Command, timeline(h))
			}
		}
		if tc.scenario != "stale-recovery" {
			continue
		}
		if first == nil {
			first = touched
		} else if !reflect.DeepEqual(first, touched) {
			t.Errorf("the same schedule declares other names in another run:\n%s\n%s", touchesText(first), touchesText(touched))
		}
	}
	for _, m := range []string{"LeaseGrant", "Txn", "LeaseRevoke"} {
		if !seen[m] {
			t.Errorf("no %s among the requests: %v", m, seen)
		}
	}
}

// touchesText shows declarations one a line.
func touchesText(ts []*harness.Touch) string {
	out := ""
	for _, t := range ts {
		out += fmt.Sprintf("%+v\n", t)
	}
	return out
}

// timeline is a history's events, one a line, for a failure's message.
func timeline(h *harness.History) string {
	out := ""
	for _, e := range h.Events {
		out += fmt.Sprintf("%d %s %v -> %s %v\n", e.Step, e.Label, e.Command, e.Reply, e.Notes)
	}
	return out
}

// The declarations say what commutes: reads of two keys, reads of a range
// and a key outside it; a put conflicts with a read over its prefix and,
// through the revision, with every other write; grants conflict (the
// server picks their IDs); a revoke conflicts with the keys still
// attached to its lease.
func TestEtcdTouchesConflict(t *testing.T) {
	const pfx = "lock%3Ak/"
	l1, l2 := int64(0x694d9a1b2c3d4e5f), int64(0x694d9a1b2c3d4e60)
	k1, k2 := []byte(pfx+"694d9a1b2c3d4e5f"), []byte(pfx+"694d9a1b2c3d4e60")
	b, names := newLeaseBook(), runNames{l1: "L1", l2: "L2"}
	b.learn(1, &pb.LeaseGrantRequest{TTL: 30}, &pb.LeaseGrantResponse{ID: l1, TTL: 30}, nil)
	b.learn(2, &pb.LeaseGrantRequest{TTL: 30}, &pb.LeaseGrantResponse{ID: l2, TTL: 30}, nil)

	first := &pb.RangeRequest{Key: []byte(pfx), RangeEnd: []byte(prefixEnd([]byte(pfx))), Limit: 1,
		SortOrder: pb.RangeRequest_ASCEND, SortTarget: pb.RangeRequest_CREATE}
	acquire := func(key []byte, lease int64) *pb.TxnRequest {
		return &pb.TxnRequest{
			Compare: []*pb.Compare{{Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL, Key: key,
				TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0}}},
			Success: []*pb.RequestOp{
				{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: key, Lease: lease}}},
				{Request: &pb.RequestOp_RequestRange{RequestRange: first}},
			},
			Failure: []*pb.RequestOp{
				{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: key}}},
				{Request: &pb.RequestOp_RequestRange{RequestRange: first}},
			},
		}
	}
	release := &pb.TxnRequest{
		Compare: []*pb.Compare{{Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL, Key: k1,
			TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 5}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: k1}}}},
	}
	get1 := touches(b, names, 1, &pb.RangeRequest{Key: k1})
	get2 := touches(b, names, 2, &pb.RangeRequest{Key: k2})
	owner := touches(b, names, 2, first)
	put1 := touches(b, names, 1, &pb.PutRequest{Key: k1, Lease: l1})
	put2 := touches(b, names, 2, &pb.PutRequest{Key: k2})
	acq1, acq2 := touches(b, names, 1, acquire(k1, l1)), touches(b, names, 2, acquire(k2, l2))
	grant := touches(b, names, 1, &pb.LeaseGrantRequest{TTL: 30})
	revokeEmpty := touches(b, names, 1, &pb.LeaseRevokeRequest{ID: l1})

	// c1's acquire put k1 with L1: its revoke now deletes k1.
	b.learn(1, acquire(k1, l1), &pb.TxnResponse{Succeeded: true}, nil)
	revokeHeld := touches(b, names, 1, &pb.LeaseRevokeRequest{ID: l1})
	ttl := touches(b, names, 1, &pb.LeaseTimeToLiveRequest{ID: l1, Keys: true})
	rel := touches(b, names, 2, release)
	// c2's release deleted k1: c1's revoke deletes nothing.
	b.learn(2, release, &pb.TxnResponse{Succeeded: true}, nil)
	revokeAfter := touches(b, names, 1, &pb.LeaseRevokeRequest{ID: l1})

	for _, tc := range []struct {
		name string
		t, u *harness.Touch
		want bool
	}{
		{"get k1, get k2", get1, get2, false},
		{"get k1, get k1", get1, get1, false},
		{"first P/, first P/", owner, owner, false},
		{"get k1, first P/", get1, owner, false},
		{"put k2, first P/", put2, owner, true},
		{"put k2, get k1", put2, get1, false},
		{"put k2, get k2", put2, get2, true},
		{"put k1, put k2: the revision", put1, put2, true},
		{"acquire, acquire: the revision and the queue", acq1, acq2, true},
		{"acquire c2, get k1", acq2, get1, false},
		{"acquire c2, first P/", acq2, owner, true},
		{"grant, grant: the IDs", grant, grant, true},
		{"grant, get k1", grant, get1, false},
		{"grant, acquire", grant, acq1, false},
		{"revoke L1 with no key, get k1", revokeEmpty, get1, false},
		{"revoke L1 with no key, put with L1", revokeEmpty, put1, true},
		{"revoke L1 with k1, get k1", revokeHeld, get1, true},
		{"revoke L1 with k1, first P/", revokeHeld, owner, true},
		{"revoke L1 with k1, get k2", revokeHeld, get2, false},
		{"revoke L1 with k1, put k2: the revision", revokeHeld, put2, true},
		{"revoke L1 with k1, its keys", revokeHeld, ttl, true},
		{"release k1, revoke L1 with k1", rel, revokeHeld, true},
		{"revoke L1 after k1's release, get k1", revokeAfter, get1, false},
		{"revoke L1 after k1's release, put k2", revokeAfter, put2, false},
	} {
		harnesstest.Conflict(t, tc.name, tc.t, tc.u, tc.want)
	}
}

// What the store cannot declare is declared by no Touch, and conflicts
// with everything, even a step that touches nothing.
func TestEtcdUndeclared(t *testing.T) {
	const pfx = "lock%3Ak/"
	l1 := int64(0x694d9a1b2c3d4e5f)
	k1, k2 := []byte(pfx+"694d9a1b2c3d4e5f"), []byte(pfx+"694d9a1b2c3d4e60")
	b, names := newLeaseBook(), runNames{l1: "L1"}
	b.learn(1, &pb.LeaseGrantRequest{TTL: 30}, &pb.LeaseGrantResponse{ID: l1, TTL: 30}, nil)
	for _, tc := range []struct {
		name   string
		client int
		req    any
	}{
		{"a revoke of another client's lease", 2, &pb.LeaseRevokeRequest{ID: l1}},
		{"a put with another client's lease", 2, &pb.PutRequest{Key: k2, Lease: l1}},
		{"a lease the run never granted", 1, &pb.LeaseTimeToLiveRequest{ID: 7}},
		{"a delete of a range", 1, &pb.DeleteRangeRequest{Key: []byte(pfx), RangeEnd: []byte(prefixEnd([]byte(pfx)))}},
		{"a prefix without its slash", 1, &pb.RangeRequest{Key: []byte("lock"), RangeEnd: []byte(prefixEnd([]byte("lock")))}},
		{"an interval", 1, &pb.RangeRequest{Key: k1, RangeEnd: k2}},
		{"a Txn with an undeclared branch", 1, &pb.TxnRequest{Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{
			RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(pfx), RangeEnd: []byte("\x00")}}}}}},
		{"another request", 1, &pb.LeaseLeasesRequest{}},
	} {
		u := touches(b, names, tc.client, tc.req)
		harnesstest.Undeclared(t, tc.name, u)
	}
}

// The book learns from the answers: a Txn the server refused did
// nothing; one that failed otherwise may have run either branch, so both
// branches' puts count; a delete that failed detaches nothing.
func TestEtcdLeaseBook(t *testing.T) {
	b, names := newLeaseBook(), runNames{5: "L1"}
	b.learn(1, &pb.LeaseGrantRequest{}, &pb.LeaseGrantResponse{ID: 5}, nil)
	put := func(k string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k), Lease: 5}}}
	}
	txn := &pb.TxnRequest{Success: []*pb.RequestOp{put("a/1")}, Failure: []*pb.RequestOp{put("a/2")}}
	b.learn(1, txn, &pb.TxnResponse{Succeeded: false}, nil)
	if !b.keys[5]["a/2"] || b.keys[5]["a/1"] {
		t.Errorf("after the else branch: %v", b.keys[5])
	}
	b.learn(1, txn, nil, status.Error(codes.NotFound, "etcdserver: requested lease not found"))
	if b.keys[5]["a/1"] {
		t.Errorf("after a Txn the server refused: %v", b.keys[5])
	}
	b.learn(1, txn, nil, errors.New("unreachable"))
	if !b.keys[5]["a/1"] || !b.keys[5]["a/2"] {
		t.Errorf("after a failed Txn: %v", b.keys[5])
	}
	b.learn(1, &pb.DeleteRangeRequest{Key: []byte("a/1")}, nil, errors.New("unreachable"))
	b.learn(1, &pb.DeleteRangeRequest{Key: []byte("a/2")}, &pb.DeleteRangeResponse{Deleted: 1}, nil)
	if !b.keys[5]["a/1"] || b.keys[5]["a/2"] {
		t.Errorf("after the deletes: %v", b.keys[5])
	}
	rv := touches(b, names, 1, &pb.LeaseRevokeRequest{ID: 5})
	if rv == nil || !strings.Contains(strings.Join(rv.Writes, " "), "key:a/1 range:a/ rev") {
		t.Errorf("revoke: %+v", rv)
	}
	b.learn(1, &pb.LeaseRevokeRequest{ID: 5}, &pb.LeaseRevokeResponse{}, nil)
	if rv := touches(b, names, 1, &pb.LeaseRevokeRequest{ID: 5}); rv == nil || len(rv.Writes) != 1 {
		t.Errorf("revoke after the revoke: %+v", rv)
	}
}

// Two runs that take the same steps get other lease IDs from the server
// but declare the same names: the leases' names in the run.
func TestEtcdTouchNamesRunStable(t *testing.T) {
	declare := func(id int64) []*harness.Touch {
		b, names := newLeaseBook(), runNames{id: "L1"}
		b.learn(1, &pb.LeaseGrantRequest{TTL: 30}, &pb.LeaseGrantResponse{ID: id}, nil)
		key := []byte(fmt.Sprintf("lock%%3Ak/%x", id))
		put := &pb.PutRequest{Key: key, Lease: id}
		out := []*harness.Touch{touches(b, names, 1, put)}
		b.learn(1, put, &pb.PutResponse{}, nil)
		return append(out, touches(b, names, 1, &pb.LeaseRevokeRequest{ID: id}),
			touches(b, names, 1, &pb.RangeRequest{Key: key}))
	}
	a, b := declare(0x694d9a1b2c3d4e5f), declare(0x3ae3a21d80143608)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("other names in another run:\n%s\n%s", touchesText(a), touchesText(b))
	}
	if w := a[1].Writes; !reflect.DeepEqual(w, []string{"lease:L1", "key:lock%3Ak/L1", "range:lock%3Ak/", "rev"}) {
		t.Errorf("revoke writes %v", w)
	}
}
