// How an etcd step reads in a timeline: a request as what it does ("Txn if
// create(P/L1)=0 then put P/L1 lease L1, first P/ else get P/L1, first
// P/"), its answer as what came of it ("then rev 5, P/L1@5", "lease L1 ttl
// 30"), keys relative to the lock's prefix P and leases by their names in
// the run (L1, L2).

package etcd

import (
	"fmt"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/status"
)

// etcdNames names the keys and leases of one run.
type etcdNames struct {
	// prefix is the lock's prefix with its slash ("lock:k/"), shown as "P/";
	// "" names no key.
	prefix string
	// lease is a lease's name in the run ("L1"), "" for none.
	lease func(id int64) string
}

// key shows k: under the lock's prefix as "P/" and the rest, a lease ID in
// hex (the key of concurrency.Mutex) by the lease's name ("P/L1").
func (n etcdNames) key(k []byte) string {
	s := string(k)
	rest, ok := strings.CutPrefix(s, n.prefix)
	if n.prefix == "" || !ok {
		return s
	}
	if id, err := strconv.ParseInt(rest, 16, 64); err == nil && rest != "" {
		if l := n.leaseName(id); !strings.HasPrefix(l, "lease ") {
			return "P/" + l
		}
	}
	return "P/" + rest
}

// leaseName is the lease's name, or "lease <id in hex>".
func (n etcdNames) leaseName(id int64) string {
	if n.lease != nil {
		if l := n.lease(id); l != "" {
			return l
		}
	}
	return "lease " + strconv.FormatInt(id, 16)
}

// rangeOf shows the keys a request names: one key, or a prefix ("P/*")
// when end is the end of key's prefix.
func (n etcdNames) rangeOf(key, end []byte) string {
	switch {
	case len(end) == 0:
		return n.key(key)
	case string(end) == prefixEnd(key):
		return n.key(key) + "*"
	case len(end) == 1 && end[0] == 0:
		return n.key(key) + ".."
	}
	return n.key(key) + ".." + n.key(end)
}

// prefixEnd is clientv3.GetPrefixRangeEnd.
func prefixEnd(key []byte) string {
	end := []byte(string(key))
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return string(end[:i+1])
		}
	}
	return "\x00"
}

// request shows an etcd request: the method and what it does.
func (n etcdNames) request(method string, req any) string {
	switch r := req.(type) {
	case *pb.RangeRequest:
		return method + " " + n.rangeOp(r)
	case *pb.PutRequest:
		return method + " " + n.putOp(r)
	case *pb.DeleteRangeRequest:
		return method + " del " + n.rangeOf(r.Key, r.RangeEnd)
	case *pb.TxnRequest:
		return method + " " + n.txn(r)
	case *pb.LeaseGrantRequest:
		return fmt.Sprintf("%s ttl %d", method, r.TTL)
	case *pb.LeaseRevokeRequest:
		return method + " " + n.leaseName(r.ID)
	case *pb.LeaseTimeToLiveRequest:
		return method + " " + n.leaseName(r.ID)
	}
	return method
}

// rangeOp shows a Range: "get P/L1", "get P/*", and "first P/" for the
// key of a prefix with the lowest create revision (clientv3.WithFirstCreate,
// which concurrency.Mutex asks for its lock's holder).
func (n etcdNames) rangeOp(r *pb.RangeRequest) string {
	if r.Limit == 1 && r.SortTarget == pb.RangeRequest_CREATE && r.SortOrder == pb.RangeRequest_ASCEND &&
		string(r.RangeEnd) == prefixEnd(r.Key) {
		return "first " + n.key(r.Key)
	}
	s := "get " + n.rangeOf(r.Key, r.RangeEnd)
	if r.CountOnly {
		s = "count " + n.rangeOf(r.Key, r.RangeEnd)
	}
	if r.Limit > 0 {
		s += fmt.Sprintf(" limit %d", r.Limit)
	}
	return s
}

func (n etcdNames) putOp(r *pb.PutRequest) string {
	s := "put " + n.key(r.Key)
	if len(r.Value) > 0 {
		s += "=" + string(r.Value)
	}
	if r.Lease != 0 {
		s += " lease " + n.leaseName(r.Lease)
	}
	return s
}

// txn shows a Txn as "if <compares> then <ops> else <ops>".
func (n etcdNames) txn(r *pb.TxnRequest) string {
	var b strings.Builder
	if len(r.Compare) > 0 {
		cs := make([]string, len(r.Compare))
		for i, c := range r.Compare {
			cs[i] = n.compare(c)
		}
		b.WriteString("if " + strings.Join(cs, " and ") + " then ")
	}
	b.WriteString(n.ops(r.Success))
	if len(r.Failure) > 0 {
		b.WriteString(" else " + n.ops(r.Failure))
	}
	return b.String()
}

func (n etcdNames) ops(ops []*pb.RequestOp) string {
	if len(ops) == 0 {
		return "nothing"
	}
	out := make([]string, len(ops))
	for i, o := range ops {
		switch {
		case o.GetRequestRange() != nil:
			out[i] = n.rangeOp(o.GetRequestRange())
		case o.GetRequestPut() != nil:
			out[i] = n.putOp(o.GetRequestPut())
		case o.GetRequestDeleteRange() != nil:
			d := o.GetRequestDeleteRange()
			out[i] = "del " + n.rangeOf(d.Key, d.RangeEnd)
		case o.GetRequestTxn() != nil:
			out[i] = "(" + n.txn(o.GetRequestTxn()) + ")"
		default:
			out[i] = "?"
		}
	}
	return strings.Join(out, ", ")
}

// compare shows a compare as "create(P/L1)=0".
func (n etcdNames) compare(c *pb.Compare) string {
	var target, value string
	switch c.Target {
	case pb.Compare_CREATE:
		target, value = "create", strconv.FormatInt(c.GetCreateRevision(), 10)
	case pb.Compare_MOD:
		target, value = "mod", strconv.FormatInt(c.GetModRevision(), 10)
	case pb.Compare_VERSION:
		target, value = "version", strconv.FormatInt(c.GetVersion(), 10)
	case pb.Compare_VALUE:
		target, value = "value", strconv.Quote(string(c.GetValue()))
	case pb.Compare_LEASE:
		target, value = "lease", n.leaseName(c.GetLease())
	}
	op := map[pb.Compare_CompareResult]string{pb.Compare_EQUAL: "=", pb.Compare_GREATER: ">",
		pb.Compare_LESS: "<", pb.Compare_NOT_EQUAL: "!="}[c.Result]
	return target + "(" + n.rangeOf(c.Key, c.RangeEnd) + ")" + op + value
}

// reply shows an etcd response: "ok rev 5", "then rev 5, P/L1@5" (a Txn:
// which branch ran, the revision, what its reads found), "lease L1 ttl 30".
func (n etcdNames) reply(resp any) string {
	switch r := resp.(type) {
	case *pb.RangeResponse:
		return n.kvs(r.Kvs, r.Count)
	case *pb.PutResponse:
		return fmt.Sprintf("ok rev %d", r.GetHeader().GetRevision())
	case *pb.DeleteRangeResponse:
		return fmt.Sprintf("%s rev %d", deleted(r.Deleted), r.GetHeader().GetRevision())
	case *pb.TxnResponse:
		branch := "else"
		if r.Succeeded {
			branch = "then"
		}
		parts := []string{fmt.Sprintf("%s rev %d", branch, r.GetHeader().GetRevision())}
		for _, o := range r.Responses {
			switch {
			case o.GetResponseRange() != nil:
				parts = append(parts, n.kvs(o.GetResponseRange().Kvs, o.GetResponseRange().Count))
			case o.GetResponseDeleteRange() != nil:
				parts = append(parts, deleted(o.GetResponseDeleteRange().Deleted))
			}
		}
		return strings.Join(parts, ", ")
	case *pb.LeaseGrantResponse:
		if r.Error != "" {
			return "error: " + r.Error
		}
		return fmt.Sprintf("lease %s ttl %d", n.leaseName(r.ID), r.TTL)
	case *pb.LeaseRevokeResponse:
		return "revoked"
	case *pb.LeaseTimeToLiveResponse:
		return fmt.Sprintf("ttl %d", r.TTL)
	}
	return "ok"
}

// deleted says how many keys a delete deleted: "deleted" for the one key a
// lock's delete names, else "deleted 0", "deleted 2".
func deleted(n int64) string {
	if n == 1 {
		return "deleted"
	}
	return fmt.Sprintf("deleted %d", n)
}

// kvs shows the keys a read found, each with its create revision (a lock
// key's fence): "P/L1@5", or "none".
func (n etcdNames) kvs(kvs []*mvccpb.KeyValue, count int64) string {
	if len(kvs) == 0 {
		return "none"
	}
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = fmt.Sprintf("%s@%d", n.key(kv.Key), kv.CreateRevision)
	}
	s := strings.Join(out, " ")
	if count > int64(len(kvs)) {
		s += fmt.Sprintf(" (of %d)", count)
	}
	return s
}

// etcdError is an error of an etcd request as a timeline shows it: the
// server's message without its "etcdserver: " ("requested lease not
// found"), not the gRPC status around it.
func etcdError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	return etcdErrorText(strings.TrimPrefix(st.Message(), "etcdserver: "))
}

// etcdErrorText is an error whose text is the message alone.
type etcdErrorText string

func (e etcdErrorText) Error() string { return string(e) }
