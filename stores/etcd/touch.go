// What each request reads and writes on the cluster, for a reduction that
// knows which steps commute (harness.Touch).
//
// The resources:
//
//   - "key:" and a key ("key:lock%3Ak/L1", a segment that is a lease's
//     ID named as the lease: runNames): the key's value, its create and
//     mod revisions, its version and the lease it is attached to.
//   - "range:" and a prefix that ends in "/": the set of keys under it. A
//     write of a key writes the range of each "/"-ending prefix of the key
//     ("lock%3Ak/" for "lock%3Ak/L1"), and a read over such a prefix
//     reads that one name. Every write writes "rev" as well, so making the
//     writes write the ranges costs no commutation between writes, and
//     two reads of a range still commute. concurrency.Mutex reads its
//     prefix with the "/" NewMutex appends; a range of any other shape
//     (a prefix without its "/", a from-key or an interval) is declared
//     by no Touch.
//   - "rev": the cluster's revision. Every write moves it (a Put, a
//     DeleteRange, a Txn either of whose branches writes, a revoke that
//     deletes keys), and the key it writes takes it as its create or mod
//     revision: the lock's fence, and the order of its queue (the first
//     key under the prefix by create revision holds the lock). Two writes
//     in the other order give other revisions: they conflict. A Txn reads
//     it: its answer's header revision is the revision of its own put,
//     which concurrency.Mutex keeps as the lock's (myRev, Header). A Range
//     does not: what a lock reads of its answer are the keys and their own
//     create and mod revisions, which the writes of those keys (declared on
//     "key:" and "range:") set; its header revision, which any write
//     anywhere moves, neither etcdlock nor concurrency.Mutex reads, nor
//     the timeline shows. A Range at a past revision reads "rev".
//   - "lease:" and a lease's name ("lease:L1"): the lease, its TTL and
//     the set of keys attached to it. A put with a lease writes it (it
//     attaches its key, and fails once the lease is gone); a revoke
//     writes it, and every key the store saw put with the lease, the
//     ranges over them and "rev" when there is any, for it deletes them.
//   - "lease-ids": the server's choice of a new lease's ID. Two grants in
//     the other order get each other's IDs (or, on different members,
//     other ones), and the IDs name the lock's keys (P/<id in hex>); the
//     timeline and the declarations name the leases L1, L2 by the order
//     of their grants, so that the other order gives c1 the name L2 and
//     c2 L1. The states are not the same under the names the steps after
//     them declare: every grant writes "lease-ids", and grants do not
//     commute. (No lock compares IDs: etcdlock orders its queue by create
//     revision. Declaring the grants independent would need names that
//     follow the client, not the order, which the timeline does not use.)
//
// What a revoke deletes is what the store knows of the keys put with the
// lease, which it learns from the answers of the requests through its
// gate: a declaration is made when a request is submitted, and a key
// another client put with the lease between a revoke's submission and
// the revoke would escape it. So the
// declarations hold while a lease is used only by the client it was
// granted to, as etcdlock's are; a put with, a revoke of, or a TimeToLive
// of the keys of a lease not granted to the requesting client in the run
// is declared by no Touch.
//
// Streams are no steps: the gate intercepts unary requests only, and the
// lease keepalives (a session's, KeepAliveOnce) go on streams. A request
// of any other kind (LeaseLeases, a member's Status, Compact) is declared
// by no Touch.

package etcd

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/locklab/locklab/harness"
)

// The resources every write or grant touches.
const (
	revRes      = "rev"
	leaseIDsRes = "lease-ids"
)

// runNames are the names of the run's leases (L1, L2: the order of their
// grants, as the timeline names them). The declarations name a lease, and
// a key segment that is a lease's ID in hex (concurrency.Mutex's
// P/<id>), by its name: the server's IDs differ from one run to the
// next, and a reduction compares what a step touched in one run with the
// steps of another that took the same steps before it, which granted the
// same leases in the same order. A key that names a lease not yet granted
// keeps its hex: no request names it before its grant. A literal "L1"
// segment shares the name of lease L1's, which costs only a commutation.
type runNames map[int64]string

func (n runNames) lease(id int64) string {
	if l := n[id]; l != "" {
		return l
	}
	return strconv.FormatInt(id, 16)
}

// key is k with each segment that is a granted lease's ID in hex named.
func (n runNames) key(k []byte) string {
	segs := strings.Split(string(k), "/")
	for i, seg := range segs {
		if id, err := strconv.ParseInt(seg, 16, 64); err == nil && seg != "" && n[id] != "" {
			segs[i] = n[id]
		}
	}
	return strings.Join(segs, "/")
}

func rangeRes(p string) string { return "range:" + p }

// leaseBook is what the store knows of the run's leases: the client each
// was granted to, and the keys put with it that may still be attached.
type leaseBook struct {
	owner map[int64]int
	keys  map[int64]map[string]bool
}

func newLeaseBook() *leaseBook {
	return &leaseBook{owner: map[int64]int{}, keys: map[int64]map[string]bool{}}
}

// mine reports whether lease id was granted to client in the run.
func (b *leaseBook) mine(id int64, client int) bool {
	c, ok := b.owner[id]
	return ok && c == client
}

// touchSet gathers a request's names; unknown: some part of it is not
// declared, and the request touches everything.
type touchSet struct {
	names         runNames
	reads, writes []string
	seen          map[string]bool
	unknown       bool
}

func (t *touchSet) add(list *[]string, kind byte, name string) {
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	if k := string(kind) + name; !t.seen[k] {
		t.seen[k] = true
		*list = append(*list, name)
	}
}

func (t *touchSet) read(name string)  { t.add(&t.reads, 'r', name) }
func (t *touchSet) write(name string) { t.add(&t.writes, 'w', name) }

func (t *touchSet) keyRes(k []byte) string   { return "key:" + t.names.key(k) }
func (t *touchSet) leaseRes(id int64) string { return "lease:" + t.names.lease(id) }

// writeKey writes key k, the ranges over it and the revision.
func (t *touchSet) writeKey(k []byte) {
	name := t.names.key(k)
	t.write("key:" + name)
	for i, c := range name {
		if c == '/' {
			t.write(rangeRes(name[:i+1]))
		}
	}
	t.write(revRes)
}

// readRange reads the keys of [key, end): one key, or the keys under a
// prefix that ends in "/".
func (t *touchSet) readRange(key, end []byte) {
	switch {
	case len(end) == 0:
		t.read(t.keyRes(key))
	case len(key) > 0 && key[len(key)-1] == '/' && string(end) == prefixEnd(key):
		t.read(rangeRes(t.names.key(key)))
	default:
		t.unknown = true
	}
}

// sorted are keys in the order of their names, the same in every run.
func (t *touchSet) sorted(keys map[string]bool) []string {
	return slices.SortedFunc(maps.Keys(keys), func(a, b string) int {
		return strings.Compare(t.names.key([]byte(a)), t.names.key([]byte(b)))
	})
}

// touch is the Touch of the names gathered, nil when some are unknown.
func (t *touchSet) touch() *harness.Touch {
	if t.unknown {
		return nil
	}
	return &harness.Touch{Reads: t.reads, Writes: t.writes}
}

// touches is what request req of client reads and writes, given what the
// store knows of the run's leases and their names; nil (everything) for a
// request it cannot declare.
func touches(b *leaseBook, names runNames, client int, req any) *harness.Touch {
	t := touchSet{names: names}
	switch r := req.(type) {
	case *pb.RangeRequest, *pb.PutRequest, *pb.DeleteRangeRequest:
		t.op(b, client, r)
	case *pb.TxnRequest:
		t.txn(b, client, r)
		t.read(revRes)
	case *pb.LeaseGrantRequest:
		t.write(leaseIDsRes)
		if r.ID != 0 {
			t.write(t.leaseRes(r.ID))
		}
	case *pb.LeaseRevokeRequest:
		if !b.mine(r.ID, client) {
			return nil
		}
		t.write(t.leaseRes(r.ID))
		for _, k := range t.sorted(b.keys[r.ID]) {
			t.writeKey([]byte(k))
		}
	case *pb.LeaseTimeToLiveRequest:
		if _, ok := b.owner[r.ID]; !ok {
			return nil
		}
		t.read(t.leaseRes(r.ID))
		if r.Keys {
			if !b.mine(r.ID, client) {
				return nil
			}
			for _, k := range t.sorted(b.keys[r.ID]) {
				t.read(t.keyRes([]byte(k)))
			}
		}
	default:
		return nil
	}
	return t.touch()
}

// op gathers one KV operation: a Range, a Put or a DeleteRange.
func (t *touchSet) op(b *leaseBook, client int, req any) {
	switch r := req.(type) {
	case *pb.RangeRequest:
		t.readRange(r.Key, r.RangeEnd)
		if r.Revision != 0 {
			t.read(revRes)
		}
	case *pb.PutRequest:
		t.writeKey(r.Key)
		if r.Lease != 0 {
			if !b.mine(r.Lease, client) {
				t.unknown = true
			}
			t.write(t.leaseRes(r.Lease))
		}
	case *pb.DeleteRangeRequest:
		if len(r.RangeEnd) != 0 {
			// The keys it deletes are not known when it is declared.
			t.unknown = true
		}
		t.writeKey(r.Key)
	default:
		t.unknown = true
	}
}

// txn gathers a Txn: its compares read their keys, and both branches'
// operations count, whichever runs.
func (t *touchSet) txn(b *leaseBook, client int, r *pb.TxnRequest) {
	for _, c := range r.Compare {
		t.readRange(c.Key, c.RangeEnd)
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, o := range ops {
			switch {
			case o.GetRequestRange() != nil:
				t.op(b, client, o.GetRequestRange())
			case o.GetRequestPut() != nil:
				t.op(b, client, o.GetRequestPut())
			case o.GetRequestDeleteRange() != nil:
				t.op(b, client, o.GetRequestDeleteRange())
			case o.GetRequestTxn() != nil:
				t.txn(b, client, o.GetRequestTxn())
			default:
				t.unknown = true
			}
		}
	}
}

// learn updates the book with what request req of client did, given its
// answer (resp, or err): a grant gives the lease to the client; a put
// with a lease attaches its key, and a delete of a key detaches it; a
// revoke deletes the lease's keys. A request the server refused did
// nothing; one that failed otherwise (a timeout, a lost connection) may
// have been done: its puts count, its deletes and revokes do not.
func (b *leaseBook) learn(client int, req, resp any, err error) {
	if refused(err) {
		return
	}
	switch r := req.(type) {
	case *pb.LeaseGrantRequest:
		if g, ok := resp.(*pb.LeaseGrantResponse); ok && err == nil && g.ID != 0 {
			b.owner[g.ID] = client
		}
	case *pb.LeaseRevokeRequest:
		if err == nil {
			delete(b.keys, r.ID)
		}
	case *pb.TxnRequest:
		tr, _ := resp.(*pb.TxnResponse)
		if err != nil {
			tr = nil
		}
		b.learnTxn(r, tr)
	case *pb.PutRequest, *pb.DeleteRangeRequest:
		b.learnOp(r, err == nil)
	}
}

// refused reports whether err is the server's refusal of a request,
// which it then did not apply: a lease or key not found, a compare or a
// request it rejects. A request that timed out, or whose connection
// failed, may have been applied.
func refused(err error) bool {
	st, ok := status.FromError(err)
	if err == nil || !ok {
		return false
	}
	switch st.Code() {
	case codes.NotFound, codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange,
		codes.AlreadyExists, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// learnTxn learns the branch a Txn ran (tr its answer), or the puts of
// both when it is not known (tr nil).
func (b *leaseBook) learnTxn(r *pb.TxnRequest, tr *pb.TxnResponse) {
	ops := append(append([]*pb.RequestOp{}, r.Success...), r.Failure...)
	switch {
	case tr != nil && tr.Succeeded:
		ops = r.Success
	case tr != nil:
		ops = r.Failure
	}
	for i, o := range ops {
		switch {
		case o.GetRequestPut() != nil:
			b.learnOp(o.GetRequestPut(), tr != nil)
		case o.GetRequestDeleteRange() != nil:
			b.learnOp(o.GetRequestDeleteRange(), tr != nil)
		case o.GetRequestTxn() != nil:
			var nested *pb.TxnResponse
			if tr != nil && i < len(tr.Responses) {
				nested = tr.Responses[i].GetResponseTxn()
			}
			b.learnTxn(o.GetRequestTxn(), nested)
		}
	}
}

// learnOp learns a put (done or not) or a delete of one key (done).
func (b *leaseBook) learnOp(req any, done bool) {
	switch r := req.(type) {
	case *pb.PutRequest:
		if r.Lease != 0 {
			if b.keys[r.Lease] == nil {
				b.keys[r.Lease] = map[string]bool{}
			}
			b.keys[r.Lease][string(r.Key)] = true
		}
	case *pb.DeleteRangeRequest:
		if done && len(r.RangeEnd) == 0 {
			for _, keys := range b.keys {
				delete(keys, string(r.Key))
			}
		}
	}
}
