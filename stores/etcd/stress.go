// etcd in stress mode (harness/stress): a run of an etcd-family strategy
// on a three-member cluster (a Node), whose clients reach the members
// through loopback proxies, and its node faults: the leader killed,
// paused or partitioned from the clients.

package etcd

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/internal/tooling/tcpproxy"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
)

// StressFaults are the node faults of a stress run on an etcd cluster,
// each striking the member that leads when it begins: fault.LeaderKill
// (SIGKILL, then started again on its data directory), fault.Pause
// (SIGSTOP, then SIGCONT) and fault.Partition (the clients' proxy to it
// cut, then healed; its peer traffic is not cut).
var StressFaults = []fault.Fault{fault.LeaderKill, fault.Pause, fault.Partition}

// stressDriver is the store's part of stress mode (its Driver's Stress).
var stressDriver = &stress.StoreDriver{
	Servers: "a three-member etcd cluster",
	Faults:  StressFaults,
	Own: map[fault.Fault]string{
		fault.LeaderKill: "strikes an etcd cluster's leader: it takes an etcd strategy",
	},
	// etcd grants leases in whole seconds.
	Lease:  time.Second,
	Start:  startStress,
	Worker: stressWorker,
}

// stressRun is a stress run's side of an etcd cluster: a proxy in front
// of each member, in member order, which the clients dial and a partition
// cuts, and an admin client that dials the members directly.
type stressRun struct {
	c         *etcdproc.Cluster
	proxies   []*tcpproxy.Proxy
	endpoints []string // the proxies', as "http://127.0.0.1:port"
	admin     *clientv3.Client
}

// startStress puts a proxy in front of every member of the cluster of n,
// a *Node.
func startStress(_ context.Context, n stress.StoreServers, _ stress.Options) (_ stress.StoreRun, err error) {
	en, ok := n.(*Node)
	if !ok {
		return nil, fmt.Errorf("stress on etcd: the servers are a %T, not an etcd Node", n)
	}
	e := &stressRun{c: en.Cluster}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	for _, m := range e.c.Members() {
		p, err := tcpproxy.New(m.ClientURL[len("http://"):])
		if err != nil {
			return nil, err
		}
		e.proxies = append(e.proxies, p)
		e.endpoints = append(e.endpoints, "http://"+p.Addr())
	}
	if e.admin, err = e.c.Client(); err != nil {
		return nil, err
	}
	return e, nil
}

// Empty empties the key space: the cluster is the run's own.
func (e *stressRun) Empty(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := e.admin.Delete(ctx, "", clientv3.WithFromKey()); err != nil {
		return fmt.Errorf("emptying etcd: %w", err)
	}
	return nil
}

// Close closes the proxies and the admin client.
func (e *stressRun) Close() error {
	for _, p := range e.proxies {
		p.Close()
	}
	if e.admin != nil {
		return e.admin.Close()
	}
	return nil
}

// stressClientConfig is the configuration of a stress client of the
// cluster at endpoints: etcdproc.ClientConfig, with gRPC keepalives that
// give up on a silent member (a paused or partitioned one) within about
// 2s, so the client moves to another.
func stressClientConfig(endpoints []string) clientv3.Config {
	cc := etcdproc.ClientConfig(endpoints...)
	cc.DialKeepAliveTime = time.Second
	cc.DialKeepAliveTimeout = time.Second
	cc.PermitWithoutStream = true
	return cc
}

// Connect gives cfg an etcd client of its own through the proxies, whose
// every request may crash the client (c).
func (e *stressRun) Connect(_ context.Context, _ int, c stress.Crasher, cfg *locklab.Config) (func(), error) {
	cc := stressClientConfig(e.endpoints)
	cc.DialOptions = append(slices.Clone(cc.DialOptions), grpc.WithChainUnaryInterceptor(crashing(c)))
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, err
	}
	cfg.Store = cli
	return func() { cli.Close() }, nil
}

// crashing is the crasher's hook on an etcd client's requests: once the
// client has crashed nothing is sent; after each request it may crash.
func crashing(c stress.Crasher) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if c.Crashed() {
			return stress.ErrCrashed
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		c.Roll()
		return err
	}
}

// WorkerArgs are the proxies' endpoints, which a worker dials.
func (e *stressRun) WorkerArgs(int) []string { return e.endpoints }

// stressWorker gives a worker process's cfg an etcd client of its own on
// the endpoints args.
func stressWorker(_ context.Context, args []string, cfg *locklab.Config) (func(), error) {
	cli, err := clientv3.New(stressClientConfig(args))
	if err != nil {
		return nil, err
	}
	cfg.Store = cli
	return func() { cli.Close() }, nil
}

// Stuck says what a lock nobody takes on etcd is: a lock key without a
// lease never frees itself (deadlock); one with a lease does, and a lock
// that still nobody takes is starved.
func (e *stressRun) Stuck(ctx context.Context, key string) (string, bool) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := e.admin.Get(cctx, etcdPrefix(key)+"/", clientv3.WithPrefix())
	if err != nil {
		return "", false
	}
	for _, kv := range resp.Kvs {
		if kv.Lease == 0 {
			return stress.KindDeadlock, true
		}
	}
	return stress.KindStarvation, true
}

// Fault strikes the member that leads now with s.Kind for s.For, then
// heals it: a kill is followed by a restart on the member's data
// directory, a pause by SIGCONT, a cut of its clients' proxy by healing
// it; then it waits until the cluster is healthy. A fault in progress is
// always healed, even when ctx ends meanwhile.
func (e *stressRun) Fault(ctx context.Context, s *stress.Strike) error {
	return stress.StrikeLeader(ctx, s, e.c, "etcd", "cluster", func(m *etcdproc.Member) *tcpproxy.Proxy { return e.proxies[m.Index] })
}
