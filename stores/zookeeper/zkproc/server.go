// A server's faults and state, the leader, health, and the four-letter
// words they are read with.

package zkproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/tooling/procid"
	"github.com/locklab/locklab/internal/tooling/serverproc"
)

// Name is the server's name, "zk" and its myid: "zk1", "zk2", ...
func (s *Server) Name() string { return "zk" + strconv.Itoa(s.ID) }

// Addr is its client address, "127.0.0.1:port" (on the docker backend,
// its container's address and port 2181).
func (s *Server) Addr() string { return net.JoinHostPort(s.host, strconv.Itoa(s.clientPort)) }

// Restart kills the process if it runs and starts it again with the same
// configuration on the same data directory (its snapshots, transaction
// log and epochs kept), so that it rejoins as the same server. It returns
// once the ensemble is healthy again with s serving: s has synced with the
// leader (or, from a quorum lost, the servers elected one).
func (s *Server) Restart(ctx context.Context) error { return s.restart(ctx, false) }

// RestartEmpty is Restart on an emptied data directory, as after a lost
// disk: the process is killed, its snapshots, transaction logs and epochs
// (the data directory's version-2) removed, its myid kept, and it is
// started with the same configuration, so that it rejoins as the same
// server with a zxid of 0. It returns as Restart does. The process
// backend only.
func (s *Server) RestartEmpty(ctx context.Context) error {
	if s.e.net != nil {
		return errors.New("zkproc: RestartEmpty on the docker backend")
	}
	return s.restart(ctx, true)
}

func (s *Server) restart(ctx context.Context, empty bool) error {
	wctx, cancel := context.WithTimeout(ctx, s.e.opts.StartTimeout)
	defer cancel()
	return s.Relaunch(wctx, func() error {
		if empty {
			if err := os.RemoveAll(filepath.Join(s.DataDir, "version-2")); err != nil {
				return err
			}
		}
		if err := s.launch(); err != nil {
			return err
		}
		// The running servers are asked again at each poll: a member
		// loss starts another server beside this one (StartEmpty), and
		// this one may follow it.
		return s.e.waitHealthyOf(wctx, func() []*Server { return s.e.running(s) })
	}, serverproc.PortTaken)
}

// StartEmpty is RestartEmpty in the background, for a member-loss fault
// whose other servers are started meanwhile: it returns at once, and done
// gives RestartEmpty's end. An emptied server asks no peer whether it
// served before, so its peers may start in any order. The process
// backend only.
func (s *Server) StartEmpty(ctx context.Context) (done <-chan error, err error) {
	if s.e.net != nil {
		return nil, errors.New("zkproc: RestartEmpty on the docker backend")
	}
	end := make(chan error, 1)
	go func() { end <- s.RestartEmpty(ctx) }()
	return end, nil
}

// Reset kills every server, empties their data directories (their myid
// kept) and starts them all again, as on the ensemble's first start: the
// same servers, with none of the history they had (a run that lost a
// server's data leaves their logs at odds). It returns once every server
// serves and one leads. The process backend only.
func (e *Ensemble) Reset(ctx context.Context) error {
	if e.net != nil {
		return errors.New("zkproc: Reset on the docker backend")
	}
	wctx, cancel := context.WithTimeout(ctx, e.opts.StartTimeout)
	defer cancel()
	return serverproc.Retry(wctx, func() error { return e.reset(wctx) }, func() {
		for _, s := range e.servers {
			s.Kill()
		}
	}, serverproc.PortTaken)
}

func (e *Ensemble) reset(ctx context.Context) error {
	for _, s := range e.servers {
		s.Kill()
	}
	for _, s := range e.servers {
		if err := os.RemoveAll(filepath.Join(s.DataDir, "version-2")); err != nil {
			return err
		}
	}
	for _, s := range e.servers {
		if err := s.launch(); err != nil {
			return err
		}
	}
	return e.waitHealthy(ctx, e.servers)
}

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string { return s.Proc.LogTail(s.LogPath, n) }

// exitError describes a server that exited while it was awaited: the tail
// of its log without the lines of stack traces.
func (s *Server) exitError() error {
	all := s.LogTail(400)
	var lines []string
	for _, l := range strings.Split(all, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "at ") && !strings.HasPrefix(strings.TrimSpace(l), "... ") {
			lines = append(lines, l)
		}
	}
	return portTaken(all, fmt.Errorf("zookeeper server %s (%s) exited\n%s", s.Name(), s.Addr(), procid.TailLines(strings.Join(lines, "\n"), 12)))
}

// portTaken is err, marked serverproc.ErrPortTaken where what the server
// said (its log, or its JVM's answer) tells of a port in use, for a
// restart to try again.
func portTaken(said string, err error) error {
	if strings.Contains(said, "Address already in use") {
		return fmt.Errorf("%w: %w", serverproc.ErrPortTaken, err)
	}
	return err
}

// ErrNotServing is the error of a server that answers, but not as part of
// a quorum: it is electing a leader, syncing, or without a quorum.
var ErrNotServing = errors.New("zookeeper: not currently serving requests")

// Status is what a server says of itself in answer to srvr.
type Status struct {
	// Mode is "leader", "follower", "observer" or "standalone".
	Mode string
	// Zxid is the last transaction id it has seen: the leader's epoch in
	// the high 32 bits, a counter in the low ones.
	Zxid uint64
	// Version is its version line ("3.8.0-..., built on ...").
	Version string
}

// Epoch is the epoch of Zxid.
func (st Status) Epoch() uint32 { return uint32(st.Zxid >> 32) }

// Status asks s for its status (srvr) within 1s or ctx: ErrNotServing
// when it answers that it does not serve.
func (s *Server) Status(ctx context.Context) (Status, error) {
	out, err := FourLetter(ctx, s.Addr(), "srvr")
	if err != nil {
		return Status{}, err
	}
	return parseSrvr(out)
}

// Mode is Status's Mode: "leader", "follower" or "standalone".
func (s *Server) Mode(ctx context.Context) (string, error) {
	st, err := s.Status(ctx)
	return st.Mode, err
}

// parseSrvr reads the answer to srvr.
func parseSrvr(out string) (Status, error) {
	var st Status
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Zookeeper version":
			st.Version = v
		case "Zxid":
			z, err := strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 64)
			if err != nil {
				return st, fmt.Errorf("zookeeper srvr: zxid %q: %w", v, err)
			}
			st.Zxid = z
		case "Mode":
			st.Mode = v
		}
	}
	if strings.Contains(out, "not currently serving") {
		return st, ErrNotServing
	}
	if st.Mode == "" {
		return st, fmt.Errorf("zookeeper srvr: no mode in %q", out)
	}
	return st, nil
}

// FourLetter sends the four-letter word cmd ("ruok", "srvr", "conf",
// "mntr"...) to the server at addr and returns its answer, within 1s or
// ctx. A paused server accepts the connection (its kernel does) and
// answers nothing: a timeout.
func FourLetter(ctx context.Context, addr, cmd string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(cctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	stop := context.AfterFunc(cctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", ctxErr(cctx, err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", ctxErr(cctx, err)
	}
	if len(b) == 0 {
		return "", fmt.Errorf("zookeeper %s: no answer to %s (four-letter words not allowed?)", addr, cmd)
	}
	return string(b), nil
}

// ctxErr is ctx's error, wrapped with err's words, when ctx has ended:
// the deadline that cut a read short.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// running lists the running servers (not killed, not paused), and also
// those of also, in order.
func (e *Ensemble) running(also ...*Server) []*Server {
	var out []*Server
	for _, s := range e.servers {
		if s.Running() || slices.Contains(also, s) {
			out = append(out, s)
		}
	}
	return out
}

// statuses asks each of ss for its status, in parallel.
func statuses(ctx context.Context, ss []*Server) ([]Status, []error) {
	sts, errs := make([]Status, len(ss)), make([]error, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Add(1)
		go func() { defer wg.Done(); sts[i], errs[i] = s.Status(ctx) }()
	}
	wg.Wait()
	return sts, errs
}

// isLeader reports whether a server in mode leads: a leader, or a server
// on its own.
func isLeader(mode string) bool { return mode == "leader" || mode == "standalone" }

// waitHealthy polls ss until every one of them serves and exactly one of
// them leads, ctx ends, or one of them exits.
func (e *Ensemble) waitHealthy(ctx context.Context, ss []*Server) error {
	return e.waitHealthyOf(ctx, func() []*Server { return ss })
}

// waitHealthyOf is waitHealthy on the servers set returns, asked at each
// poll.
func (e *Ensemble) waitHealthyOf(ctx context.Context, set func() []*Server) error {
	delay := 5 * time.Millisecond
	var last error
	for {
		ss := set()
		if len(ss) == 0 {
			return errors.New("zkproc: no server running")
		}
		for _, s := range ss {
			select {
			case <-s.Exited():
				return s.exitError()
			default:
			}
			if s.Box() != nil && !s.BoxAlive(ctx) {
				return s.exitError()
			}
		}
		sts, errs := statuses(ctx, ss)
		var leaders []string
		last = nil
		for i, s := range ss {
			if errs[i] != nil {
				last = fmt.Errorf("%s: %w", s.Name(), errs[i])
				break
			}
			if isLeader(sts[i].Mode) {
				leaders = append(leaders, s.Name())
			}
		}
		if last == nil && len(leaders) == 1 {
			return nil
		}
		if last == nil {
			last = fmt.Errorf("%d leaders %v", len(leaders), leaders)
		}
		select {
		case <-ctx.Done():
			tail := ""
			for i, s := range ss {
				if errs[i] != nil {
					tail = "\n" + s.Name() + "'s log:\n" + s.LogTail(10)
					break
				}
			}
			return fmt.Errorf("zookeeper ensemble not healthy: %w (last: %v)%s", ctx.Err(), last, tail)
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// WaitHealthy returns once every running server (not killed, not paused)
// serves and exactly one of them leads, or ctx ends.
func (e *Ensemble) WaitHealthy(ctx context.Context) error {
	return e.waitHealthy(ctx, e.running())
}

// Leader returns the leader, asking every running server (not killed, not
// paused) for its mode: the one that says leader (standalone, for a single
// server), the one of the highest epoch where two do (a paused leader
// just resumed). It waits, polling, while none does (an election after
// the leader died), until ctx ends.
func (e *Ensemble) Leader(ctx context.Context) (*Server, error) {
	delay := 5 * time.Millisecond
	var last error
	for {
		s, err := e.leaderNow(ctx)
		if err == nil {
			return s, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("zookeeper: no leader: %w (last: %v)", ctx.Err(), last)
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

func (e *Ensemble) leaderNow(ctx context.Context) (*Server, error) {
	ss := e.running()
	if len(ss) == 0 {
		return nil, errors.New("no server running")
	}
	sts, errs := statuses(ctx, ss)
	var best *Server
	var bestZxid uint64
	for i, s := range ss {
		if errs[i] == nil && isLeader(sts[i].Mode) && (best == nil || sts[i].Zxid > bestZxid) {
			best, bestZxid = s, sts[i].Zxid
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no server says it leads (%v)", errors.Join(errs...))
	}
	return best, nil
}

// KillLeader kills the leader (SIGKILL) and returns it. The others elect
// a new one if they are a quorum: Leader waits for it.
func (e *Ensemble) KillLeader(ctx context.Context) (*Server, error) {
	s, err := e.Leader(ctx)
	if err != nil {
		return nil, err
	}
	s.Kill()
	return s, nil
}

// String returns the server's name.
func (s *Server) String() string { return s.Name() }
