package stress

import (
	"context"
	"fmt"
	"time"

	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/internal/tooling/tcpproxy"
)

// StrikeLeader strikes s at the member of cluster c that leads when it
// begins, for a store's StoreRun.Fault: fault.LeaderKill (SIGKILL, then
// started again on its data directory), fault.Pause (SIGSTOP, then SIGCONT)
// or fault.Partition (the clients' proxy to it, proxy(member), cut, then
// healed; its peers still reach it). It then waits for the cluster to be
// healthy again. store names the store in an error ("etcd"), what names
// the cluster in the last step ("cluster", "ensemble").
func StrikeLeader[M fault.Member](ctx context.Context, s *Strike, c fault.Quorum[M], store, what string, proxy func(M) *tcpproxy.Proxy) error {
	bg := context.WithoutCancel(ctx)
	kind := s.Kind()
	lctx, cancel := context.WithTimeout(bg, 10*time.Second)
	m, err := c.Leader(lctx)
	cancel()
	var begin, end func() error
	if err == nil {
		s.Node(m.String() + " (leader)")
		switch kind {
		case fault.LeaderKill:
			begin = func() error { m.Kill(); return nil }
			end = func() error { return m.Restart(bg) }
			s.Step(fmt.Sprintf("leader %s killed (SIGKILL) for %v", m, s.For()))
		case fault.Pause:
			begin, end = m.Stop, m.Cont
			s.Step(fmt.Sprintf("leader %s paused (SIGSTOP) for %v", m, s.For()))
		case fault.Partition:
			p := proxy(m)
			begin = func() error { p.Cut(); return nil }
			end = func() error { p.Heal(); return nil }
			s.Step(fmt.Sprintf("leader %s cut off from the clients for %v (its peers still reach it)", m, s.For()))
		default:
			err = fmt.Errorf("node fault %v on %s: %w", kind, store, fault.ErrUnsupported)
		}
	}
	if err == nil {
		err = s.Hold(ctx, begin, end)
	}
	if err == nil {
		hctx, cancel := context.WithTimeout(bg, 30*time.Second)
		err = c.WaitHealthy(hctx)
		cancel()
	}
	if err != nil {
		s.Step(fmt.Sprintf("%s failed: %v", kind, err))
		return err
	}
	s.Step(fmt.Sprintf("%s back and the %s healthy after %v", m, what, s.Elapsed().Round(time.Millisecond)))
	return nil
}
