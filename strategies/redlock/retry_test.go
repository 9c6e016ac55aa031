package redlock_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies/redlock"
)

// pause stops s (SIGSTOP) until resume is called or the test ends: its
// connections stay open and its listen queue takes new ones, but nothing is
// answered.
func pause(t *testing.T, s *redistest.Server) (resume func()) {
	t.Helper()
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	resume = func() {
		if once.CompareAndSwap(false, true) {
			if err := s.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	return resume
}

// holders counts the nodes that hold token under key.
func holders(t *testing.T, srv []*redistest.Server, key, token string) int {
	t.Helper()
	n := 0
	for _, s := range srv {
		if get(t, s, key) == token {
			n++
		}
	}
	return n
}

// failedNodes is the set of nodes that err joins a *NodeError for.
func failedNodes(err error) map[int]bool {
	out := map[int]bool{}
	for _, ne := range nodeErrors(err) {
		out[ne.Node] = true
	}
	return out
}

// timedOut reports whether err is a timeout: the context's deadline, or the
// connection's read deadline set from it.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// Five nodes: two grant, one refuses (another client holds the key there),
// two time out (paused). Had the paused nodes answered, the round could
// have won: it is undecided, so unavailable and retried, not refused. Once
// the paused nodes are back, Wait wins.
func TestMixedRoundIsUnavailableAndRetried(t *testing.T) {
	const ttl = time.Second // stale keys the paused nodes set late expire soon
	srv, l := cluster(t, 5, locklab.Config{
		NodeTimeout: 250 * time.Millisecond,
		Retry:       locklab.RetryPolicy{Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond},
	})
	const key = "mixed"
	srv[2].Do(t, "SET", key, "foreign", "PX", 60000)
	resume3, resume4 := pause(t, srv[3]), pause(t, srv[4])

	_, err := l.Acquire(context.Background(), key, ttl)
	t.Log(err)
	if !errors.Is(err, locklab.ErrUnavailable) || errors.Is(err, locklab.ErrNotAcquired) {
		t.Fatalf("2 granted, 1 refused, 2 timed out: %v, want ErrUnavailable only", err)
	}
	if !locklab.IsRetryable(err) {
		t.Fatalf("an undecided round is not marked retryable: %v", err)
	}
	if !strings.Contains(err.Error(), "refused by 1") || !strings.Contains(err.Error(), "2 failed") {
		t.Fatalf("the error does not tell the refusal and the failures apart: %v", err)
	}
	if f := failedNodes(err); len(f) != 2 || !f[3] || !f[4] {
		t.Fatalf("node errors for %v, want the paused nodes 3 and 4: %v", f, err)
	}
	for _, ne := range nodeErrors(err) {
		if !timedOut(ne) {
			t.Fatalf("node %d did not time out: %v", ne.Node, ne)
		}
	}
	for _, i := range []int{0, 1} {
		if got := get(t, srv[i], key); got != "" {
			t.Fatalf("node %d kept %q after the failed round", i, got)
		}
	}
	if got := get(t, srv[2], key); got != "foreign" {
		t.Fatalf("the refusing node holds %q, want the other client's key", got)
	}

	// A Wait that ends while the nodes are still paused says unavailable.
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = l.Wait(short, key, ttl)
	t.Log(err)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, locklab.ErrUnavailable) ||
		errors.Is(err, locklab.ErrNotAcquired) {
		t.Fatalf("wait ended by its deadline on undecided rounds: %v, want the deadline and ErrUnavailable only", err)
	}

	// A Wait that is running when the nodes come back wins.
	for _, s := range srv[:3] {
		s.Do(t, "CONFIG", "RESETSTAT")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		lease locklab.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		lease, err := l.Wait(ctx, key, ttl)
		done <- result{lease, err}
	}()
	// Let it fail a few rounds first: every round sends SET to node 0.
	for commandCalls(t, srv[0], "set") < 3 {
		select {
		case r := <-done:
			t.Fatalf("wait returned while two nodes were paused: %+v", r)
		case <-time.After(10 * time.Millisecond):
		}
	}
	resume3()
	resume4()
	r := <-done
	if r.err != nil {
		t.Fatalf("wait after the paused nodes came back: %v", r.err)
	}
	if n := holders(t, srv, key, r.lease.Token); n < l.Quorum() {
		t.Fatalf("the lease is held on %d nodes, want a majority", n)
	}
	if got := get(t, srv[2], key); got != "foreign" {
		t.Fatalf("node 2 holds %q, want the other client's key untouched", got)
	}
	if err := l.Release(context.Background(), r.lease); err != nil {
		t.Fatal(err)
	}
}

// Five nodes: three refuse, two time out. The refusals alone leave no
// majority, whatever the paused nodes would say: refused, and a Wait that
// ends says so.
func TestRefusedByMajorityWithNodesDown(t *testing.T) {
	srv, l := cluster(t, 5, locklab.Config{
		NodeTimeout: 250 * time.Millisecond,
		Retry:       locklab.RetryPolicy{Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond},
	})
	const key = "refused"
	for _, s := range srv[:3] {
		s.Do(t, "SET", key, "foreign", "PX", 60000)
	}
	pause(t, srv[3])
	pause(t, srv[4])

	_, err := l.Acquire(context.Background(), key, time.Second)
	t.Log(err)
	if !errors.Is(err, locklab.ErrNotAcquired) || errors.Is(err, locklab.ErrUnavailable) {
		t.Fatalf("3 refused, 2 timed out: %v, want ErrNotAcquired only", err)
	}
	for _, i := range []int{3, 4} {
		if !strings.Contains(err.Error(), fmt.Sprintf("redlock node %d (%s)", i, srv[i].Addr)) {
			t.Fatalf("the refusal does not name the failed node %d: %v", i, err)
		}
	}

	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = l.Wait(short, key, time.Second)
	t.Log(err)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, locklab.ErrNotAcquired) ||
		errors.Is(err, locklab.ErrUnavailable) {
		t.Fatalf("wait ended by its deadline on refused rounds: %v, want the deadline and ErrNotAcquired only", err)
	}
	for _, s := range srv[:3] {
		if got := get(t, s, key); got != "foreign" {
			t.Fatalf("a refusing node holds %q, want the other client's key", got)
		}
	}
}

// Every split of five nodes into granting, refusing and failing is
// classified as the documentation says: refused when the refusals alone
// leave no majority, unavailable otherwise.
func TestClassificationMatrix(t *testing.T) {
	srv, l := cluster(t, 5, locklab.Config{NodeTimeout: 250 * time.Millisecond})
	// Failing nodes are paused; refusing nodes hold another client's key.
	resume := make([]func(), 5)
	for refused := 0; refused <= 5; refused++ {
		for failed := 0; refused+failed <= 5; failed++ {
			granted := 5 - refused - failed
			if granted >= l.Quorum() {
				continue // won: not a failure to classify
			}
			t.Run(fmt.Sprintf("%d-granted-%d-refused-%d-failed", granted, refused, failed), func(t *testing.T) {
				key := t.Name()
				for i := range refused {
					srv[i].Do(t, "SET", key, "foreign", "PX", 60000)
				}
				for i := refused; i < refused+failed; i++ {
					resume[i] = pause(t, srv[i])
				}
				defer func() {
					for i := refused; i < refused+failed; i++ {
						resume[i]()
					}
				}()
				_, err := l.Acquire(context.Background(), key, 10*time.Second)
				wantRefused := granted+failed < l.Quorum()
				switch {
				case err == nil:
					t.Fatal("acquired without a majority")
				case wantRefused && (!errors.Is(err, locklab.ErrNotAcquired) || errors.Is(err, locklab.ErrUnavailable)):
					t.Fatalf("%v, want ErrNotAcquired only", err)
				case !wantRefused && (!errors.Is(err, locklab.ErrUnavailable) || errors.Is(err, locklab.ErrNotAcquired)):
					t.Fatalf("%v, want ErrUnavailable only", err)
				case !wantRefused && !locklab.IsRetryable(err):
					t.Fatalf("%v is not marked retryable", err)
				}
			})
		}
	}
}

// getCounter is a real pool that counts its GetContext calls.
type getCounter struct {
	*redis.Pool
	addr string
	gets atomic.Int32
}

func (g *getCounter) GetContext(ctx context.Context) (redis.Conn, error) {
	g.gets.Add(1)
	return g.Pool.GetContext(ctx)
}

func (g *getCounter) Addr() string { return g.addr }

// tlsNode starts a TLS redis-server and returns it with a cold pool on its
// TLS port. The pool's dial timeout, which alone bounds redigo's TLS
// handshake, is a generous 10s.
func tlsNode(t *testing.T) (*redistest.TLSServer, *getCounter) {
	t.Helper()
	s := redistest.StartTLS(t)
	p, err := locklab.NewPoolOptions(locklab.PoolOptions{Addr: s.TLSAddr, TLSConfig: &tls.Config{RootCAs: s.CA},
		DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return s, &getCounter{Pool: p, addr: s.TLSAddr}
}

func connectionsReceived(t *testing.T, s *redistest.Server) int {
	t.Helper()
	info, err := redis.String(s.Do(t, "INFO", "stats"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
			var n int
			fmt.Sscan(v, &n)
			return n
		}
	}
	t.Fatalf("no total_connections_received in INFO stats")
	return 0
}

// A TLS handshake that stalls (the server is paused after its kernel
// accepted the TCP connection) holds the round no longer than the node
// timeout, although redigo bounds the handshake by its dial timeout only,
// not by the context: the lease keeps its validity. The handshake is not
// given up: once the server is back it completes, and its connection serves
// the next round.
func TestStalledSetupDoesNotHoldTheRound(t *testing.T) {
	tlsSrv, tlsPool := tlsNode(t)
	plain := redistest.Start(t, 2)
	l, err := redlock.New(locklab.Config{NodeTimeout: 400 * time.Millisecond, Nodes: []locklab.ConnSource{
		tlsPool, named{plain[0].Pool, plain[0].Addr}, named{plain[1].Pool, plain[1].Addr},
	}})
	if err != nil {
		t.Fatal(err)
	}
	resume := pause(t, tlsSrv.Server)
	// Waiting out the 10s handshake timeout would leave no validity of a
	// 2s TTL.
	lease, err := l.Acquire(context.Background(), "cold", 2*time.Second)
	if err != nil {
		t.Fatalf("acquire with the TLS node's handshake stalled: %v", err)
	}
	if !lease.Valid(time.Now()) {
		t.Fatalf("lease %+v returned already expired", lease)
	}
	resume()
	deadline := time.Now().Add(10 * time.Second)
	for tlsPool.IdleCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stalled set-up did not finish into the pool once the server was back")
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := connectionsReceived(t, tlsSrv.Server)
	if err := l.Release(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	lease, err = l.Acquire(context.Background(), "warm", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, tlsSrv.Server, "warm"); got != lease.Token {
		t.Fatalf("the TLS node holds %q, want the lease's token", got)
	}
	if after := connectionsReceived(t, tlsSrv.Server); after != before {
		t.Fatalf("the TLS node received %d new connections: the finished set-up was not used", after-before)
	}
}

// A Wait that starts on cold connections which cannot be set up within the
// node timeout (every node's TLS handshake stalls) keeps retrying, and wins
// once set-up can finish.
func TestColdWaitWins(t *testing.T) {
	var (
		nodes   []locklab.ConnSource
		counts  []*getCounter
		resumes []func()
		servers []*redistest.Server
	)
	for range 3 {
		s, p := tlsNode(t)
		nodes = append(nodes, p)
		counts = append(counts, p)
		servers = append(servers, s.Server)
		resumes = append(resumes, pause(t, s.Server))
	}
	l, err := redlock.New(locklab.Config{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		lease locklab.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		lease, err := locklab.Wait(ctx, l, "cold", 10*time.Second, locklab.RetryPolicy{})
		done <- result{lease, err}
	}()
	// Two rounds at least, each asking every node for a connection.
	for _, c := range counts {
		for c.gets.Load() < 2 {
			select {
			case r := <-done:
				t.Fatalf("wait returned while no connection could be set up: %+v", r)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	for _, resume := range resumes {
		resume()
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("wait on cold connections: %v", r.err)
	}
	if n := holders(t, servers, "cold", r.lease.Token); n < l.Quorum() {
		t.Fatalf("the lease is held on %d nodes, want a majority", n)
	}
}
