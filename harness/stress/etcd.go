// etcd: a run of an etcd-family strategy on a three-member etcd cluster
// (Options.Etcd), whose clients reach the members through loopback
// proxies, and its node faults: the leader killed, paused or partitioned
// from the clients.

package stress

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
)

// EtcdFaultKinds are the node faults of a run on an etcd cluster
// (Options.Etcd), each striking the member that leads when it begins:
// node.LeaderKill (SIGKILL, then started again on its data directory),
// node.Pause (SIGSTOP, then SIGCONT) and node.Partition (the clients'
// proxy to it cut, then healed; its peer traffic is not cut).
var EtcdFaultKinds = []node.Fault{node.LeaderKill, node.Pause, node.Partition}

// etcdFamily is the family of the strategies that lock on etcd
// (strategies/etcdlock.Family; the package is not imported here, a
// program registers it).
const etcdFamily = "etcd"

// etcdRun is the run's side of an etcd cluster: a proxy in front of each
// member, in member order, which the clients dial and a partition cuts,
// and an admin client that dials the members directly.
type etcdRun struct {
	c         *etcdproc.Cluster
	proxies   []*node.Proxy
	endpoints []string // the proxies', as "http://127.0.0.1:port"
	admin     *clientv3.Client
}

// checkEtcd refuses an etcd-family strategy without an etcd cluster and
// an etcd cluster with any other strategy, and the faults a run on etcd
// does not inject.
func (o *Options) checkEtcd() error {
	if (o.desc.Family == etcdFamily) != (o.Etcd != nil) {
		if o.Etcd == nil {
			return lockkit.Invalid("stress: strategy %s locks on etcd: Options.Etcd is required", o.Strategy)
		}
		return lockkit.Invalid("stress: strategy %s does not lock on etcd", o.Strategy)
	}
	if o.Etcd != nil && (o.TTL < time.Second || o.TTL%time.Second != 0) {
		return lockkit.Invalid("stress: TTL %v: etcd's leases are whole seconds, at least 1s", o.TTL)
	}
	for _, f := range o.Faults {
		if o.Etcd != nil && !slices.Contains(EtcdFaultKinds, f) {
			return lockkit.Invalid("stress: node fault %v is not one a run on etcd injects (want %s)", f, node.JoinFaults(EtcdFaultKinds))
		}
		if o.Etcd == nil && f == node.LeaderKill {
			return lockkit.Invalid("stress: node fault %v strikes an etcd cluster's leader: it takes an etcd strategy", f)
		}
	}
	return nil
}

// startEtcd puts a proxy in front of every member and empties the key
// space: the cluster is the run's own.
func startEtcd(ctx context.Context, c *etcdproc.Cluster) (_ *etcdRun, err error) {
	e := &etcdRun{c: c}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	for _, m := range c.Members() {
		p, err := node.NewProxy(m.ClientURL[len("http://"):])
		if err != nil {
			return nil, err
		}
		e.proxies = append(e.proxies, p)
		e.endpoints = append(e.endpoints, "http://"+p.Addr())
	}
	if e.admin, err = c.Client(); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := e.admin.Delete(cctx, "", clientv3.WithFromKey()); err != nil {
		return nil, fmt.Errorf("emptying etcd: %w", err)
	}
	return e, nil
}

func (e *etcdRun) close() {
	for _, p := range e.proxies {
		p.Close()
	}
	if e.admin != nil {
		e.admin.Close()
	}
}

// EtcdClientConfig is the configuration of a stress client of the etcd
// cluster at endpoints: etcdproc.ClientConfig, with gRPC keepalives that
// give up on a silent member (a paused or partitioned one) within about
// 2s, so the client moves to another.
func EtcdClientConfig(endpoints []string) clientv3.Config {
	cc := etcdproc.ClientConfig(endpoints...)
	cc.DialKeepAliveTime = time.Second
	cc.DialKeepAliveTimeout = time.Second
	cc.PermitWithoutStream = true
	return cc
}

// client is a new etcd client for one client incarnation, whose every
// request may crash it (cr).
func (e *etcdRun) client(cr *crasher) (*clientv3.Client, error) {
	cc := EtcdClientConfig(e.endpoints)
	cc.DialOptions = append(slices.Clone(cc.DialOptions), grpc.WithChainUnaryInterceptor(cr.unary))
	return clientv3.New(cc)
}

// unary is the crasher's hook on an etcd client's requests: once the
// client has crashed nothing is sent; after each request it may crash.
func (c *crasher) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if c.crashed.Load() {
		return errCrashed
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	c.roll()
	return err
}

// stuckKind is the liveness violation of a lock nobody takes on etcd: a
// lock key without a lease never frees itself (deadlock); one with a
// lease does, and a lock that still nobody takes is starved.
func (e *etcdRun) stuckKind(ctx context.Context, key string) (string, bool) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := e.admin.Get(cctx, etcdPrefix(key)+"/", clientv3.WithPrefix())
	if err != nil {
		return "", false
	}
	for _, kv := range resp.Kvs {
		if kv.Lease == 0 {
			return KindDeadlock, true
		}
	}
	return KindStarvation, true
}

// etcdPrefix is etcdlock.Prefix: the lock's prefix for key.
func etcdPrefix(key string) string { return strings.NewReplacer("%", "%25", "/", "%2F").Replace(key) }

// etcdFault strikes the member that leads now with kind for FaultFor, then
// heals it: a kill is followed by a restart on the member's data
// directory, a pause by SIGCONT, a cut of its clients' proxy by healing
// it. A fault in progress is always healed, even when ctx ends meanwhile.
func (r *recorder) etcdFault(ctx context.Context, kind node.Fault) {
	bg := context.WithoutCancel(ctx)
	e := r.etcd
	f := NodeFault{Kind: kind, At: r.now()}
	step := func(what string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		ev := Event{At: r.now(), Client: NodeFaultClient, What: what}
		f.Steps = append(f.Steps, ev)
		r.event(NodeFaultClient, what)
	}
	lctx, cancel := context.WithTimeout(bg, 10*time.Second)
	m, err := e.c.Leader(lctx)
	cancel()
	r.faulting.Store(true)
	var begin, end func() error
	if err == nil {
		f.Node = m.Name + " (leader)"
		switch kind {
		case node.LeaderKill:
			begin = func() error { m.Kill(); return nil }
			end = func() error { return m.Restart(bg) }
			step(fmt.Sprintf("leader %s killed (SIGKILL) for %v", m.Name, r.o.FaultFor))
		case node.Pause:
			begin, end = m.Stop, m.Cont
			step(fmt.Sprintf("leader %s paused (SIGSTOP) for %v", m.Name, r.o.FaultFor))
		case node.Partition:
			p := e.proxies[m.Index]
			begin = func() error { p.Cut(); return nil }
			end = func() error { p.Heal(); return nil }
			step(fmt.Sprintf("leader %s cut off from the clients for %v (its peers still reach it)", m.Name, r.o.FaultFor))
		default:
			err = fmt.Errorf("node fault %v on etcd: %w", kind, node.ErrUnsupported)
		}
	}
	if err == nil {
		if err = begin(); err == nil {
			select {
			case <-ctx.Done():
			case <-time.After(r.o.FaultFor):
			}
			err = end()
		}
	}
	if err == nil {
		hctx, cancel := context.WithTimeout(bg, 30*time.Second)
		err = e.c.WaitHealthy(hctx)
		cancel()
	}
	r.faultEnded.Store(int64(r.now()))
	r.faulting.Store(false)
	f.For = r.now() - f.At
	if err != nil {
		f.Err = err.Error()
		step(fmt.Sprintf("%s failed: %v", kind, err))
	} else {
		step(fmt.Sprintf("%s back and the cluster healthy after %v", m.Name, f.For.Round(time.Millisecond)))
	}
	r.mu.Lock()
	r.nfaults = append(r.nfaults, f)
	r.mu.Unlock()
}
