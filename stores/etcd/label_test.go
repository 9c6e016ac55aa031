package etcd

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The requests and answers of etcd's lock read as what they do, keys
// relative to the lock's prefix and leases by name.
func TestEtcdLabels(t *testing.T) {
	const pfx = "lock:k/"
	l1, l2 := int64(0x694d9a1b2c3d4e5f), int64(0x694d9a1b2c3d4e60)
	n := etcdNames{prefix: pfx, lease: func(id int64) string {
		return map[int64]string{l1: "L1", l2: "L2"}[id]
	}}
	myKey := []byte(pfx + "694d9a1b2c3d4e5f")
	first := &pb.RangeRequest{Key: []byte(pfx), RangeEnd: []byte("lock:k0"), Limit: 1,
		SortOrder: pb.RangeRequest_ASCEND, SortTarget: pb.RangeRequest_CREATE}
	acquire := &pb.TxnRequest{
		Compare: []*pb.Compare{{Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL, Key: myKey,
			TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0}}},
		Success: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: myKey, Lease: l1}}},
			{Request: &pb.RequestOp_RequestRange{RequestRange: first}},
		},
		Failure: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: myKey}}},
			{Request: &pb.RequestOp_RequestRange{RequestRange: first}},
		},
	}
	assert.Equal(t, "Txn if create(P/L1)=0 then put P/L1 lease L1, first P/ else get P/L1, first P/",
		n.request("Txn", acquire))
	release := &pb.TxnRequest{
		Compare: []*pb.Compare{{Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL, Key: myKey,
			TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 5}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: myKey}}}},
	}
	assert.Equal(t, "Txn if create(P/L1)=5 then del P/L1", n.request("Txn", release))
	assert.Equal(t, "LeaseGrant ttl 30", n.request("LeaseGrant", &pb.LeaseGrantRequest{TTL: 30}))
	assert.Equal(t, "LeaseRevoke L2", n.request("LeaseRevoke", &pb.LeaseRevokeRequest{ID: l2}))
	assert.Equal(t, "LeaseRevoke lease 7", n.request("LeaseRevoke", &pb.LeaseRevokeRequest{ID: 7}))
	assert.Equal(t, "DeleteRange del P/L1", n.request("DeleteRange", &pb.DeleteRangeRequest{Key: myKey}))
	assert.Equal(t, "Range get P/L1", n.request("Range", &pb.RangeRequest{Key: myKey}))
	assert.Equal(t, "Range get P/*", n.request("Range", &pb.RangeRequest{Key: []byte(pfx), RangeEnd: []byte("lock:k0")}))
	assert.Equal(t, "Range get other", n.request("Range", &pb.RangeRequest{Key: []byte("other")}))

	hdr := &pb.ResponseHeader{ClusterId: 1, MemberId: 2, Revision: 5, RaftTerm: 3}
	owner := &pb.RangeResponse{Header: hdr, Kvs: []*mvccpb.KeyValue{{Key: myKey, CreateRevision: 5}}, Count: 1}
	assert.Equal(t, "then rev 5, P/L1@5", n.reply(&pb.TxnResponse{Header: hdr, Succeeded: true, Responses: []*pb.ResponseOp{
		{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{Header: hdr}}},
		{Response: &pb.ResponseOp_ResponseRange{ResponseRange: owner}},
	}}))
	assert.Equal(t, "else rev 5, deleted 0", n.reply(&pb.TxnResponse{Header: hdr, Responses: []*pb.ResponseOp{
		{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: &pb.DeleteRangeResponse{Header: hdr}}},
	}}))
	assert.Equal(t, "else rev 5", n.reply(&pb.TxnResponse{Header: hdr}))
	assert.Equal(t, "lease L2 ttl 30", n.reply(&pb.LeaseGrantResponse{Header: hdr, ID: l2, TTL: 30}))
	assert.Equal(t, "ok rev 5", n.reply(&pb.PutResponse{Header: hdr}))
	assert.Equal(t, "deleted rev 5", n.reply(&pb.DeleteRangeResponse{Header: hdr, Deleted: 1}))
	assert.Equal(t, "none", n.reply(&pb.RangeResponse{Header: hdr}))
	assert.Equal(t, "revoked", n.reply(&pb.LeaseRevokeResponse{Header: hdr}))

	err := status.Error(codes.NotFound, "etcdserver: requested lease not found")
	assert.Equal(t, "requested lease not found", etcdError(err).Error(), "shown as error: requested lease not found")
	plain := errors.New("unreachable: n1")
	assert.Equal(t, plain, etcdError(plain))

	var none etcdNames
	assert.Equal(t, pfx+"694d9a1b2c3d4e5f", none.key(myKey), "without a prefix, keys are shown whole")
}
