// A Redis Sentinel group: a master, its replicas, and the Sentinels that
// watch them and promote a replica when the master stops answering.

package redisnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/internal/tooling/backends"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab/lockkit"
)

// SentinelOptions configure StartSentinels. The zero value starts a master,
// two replicas and three Sentinels that watch the master under the name
// "locklab", with quorum 2, and fail it over once it has not answered for 1s.
type SentinelOptions struct {
	// MasterName is the name the Sentinels know the master by. Default
	// "locklab".
	MasterName string
	// Replicas is the number of replicas of the master. Default 2.
	Replicas int
	// Sentinels is the number of Sentinels. Default 3.
	Sentinels int
	// Quorum is how many Sentinels must find the master unreachable before
	// a failover starts. Default: a majority of Sentinels. (The failover
	// itself always needs a majority to elect a leader.)
	Quorum int
	// DownAfter is down-after-milliseconds: how long the master may fail
	// to answer before a Sentinel deems it down. Default 1s.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout: how long a failover may take
	// before it is abandoned, and (doubled) how long a Sentinel waits
	// before trying again after one failed. Default 3s.
	FailoverTimeout time.Duration
	// ReadyTimeout bounds the wait, at start, until every Sentinel knows
	// the master, each replica and the other Sentinels. Default 30s.
	ReadyTimeout time.Duration
}

var masterNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func (o *SentinelOptions) defaults() error {
	if o.MasterName == "" {
		o.MasterName = "locklab"
	}
	if !masterNameRE.MatchString(o.MasterName) {
		return lockkit.Invalid("node: Sentinel master name %q: use letters, digits, '.', '_' and '-'", o.MasterName)
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.Replicas < 1 {
		return lockkit.Invalid("node: a Sentinel group needs at least 1 replica to fail over to, got %d", o.Replicas)
	}
	if o.Sentinels == 0 {
		o.Sentinels = 3
	}
	if o.Sentinels < 1 {
		return lockkit.Invalid("node: a Sentinel group needs at least 1 Sentinel, got %d", o.Sentinels)
	}
	if o.Quorum == 0 {
		o.Quorum = o.Sentinels/2 + 1
	}
	if o.Quorum < 1 || o.Quorum > o.Sentinels {
		return lockkit.Invalid("node: Sentinel quorum %d: want 1..%d (the number of Sentinels)", o.Quorum, o.Sentinels)
	}
	if o.DownAfter == 0 {
		o.DownAfter = time.Second
	}
	if o.FailoverTimeout == 0 {
		o.FailoverTimeout = 3 * time.Second
	}
	if o.DownAfter < time.Millisecond || o.FailoverTimeout < time.Millisecond {
		return lockkit.Invalid("node: Sentinel DownAfter %v and FailoverTimeout %v must be at least 1ms",
			o.DownAfter, o.FailoverTimeout)
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 30 * time.Second
	}
	return nil
}

// SentinelGroup is a master, its replicas and the Sentinels watching them,
// started by StartSentinels. Which data node is the master is the
// Sentinels' business: ask Master. The group implements Pauser, Killer,
// Restarter and FailingOver on the node the Sentinels call the master.
// Close removes the Sentinels and the data nodes; the cluster's Close (and
// SIGINT or SIGTERM) removes them too.
type SentinelGroup struct {
	c    *Cluster
	opts SentinelOptions
	// data and sentinels are filled while starting and then fixed; their
	// nodes are also in c.grouped until Close.
	data      []*Node
	sentinels []*Node

	mu     sync.Mutex
	paused *Node // the master Pause froze, for Resume
	killed *Node // the master Kill stopped, for Restart
}

// StartSentinels starts a Sentinel group on the cluster's backend: a new
// master ("sg1m" for the cluster's first group), opts.Replicas replicas of it
// ("sg1r1", ...) synchronized over the replication link, and opts.Sentinels
// Sentinels ("sg1s1", ...) monitoring the master, and waits until every
// Sentinel knows the master, its replicas and the other Sentinels. The nodes
// are not among Nodes or Replicas. Not supported on the addrs backend.
func (c *Cluster) StartSentinels(ctx context.Context, opts SentinelOptions) (*SentinelGroup, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if c.be.name() == backends.Addrs {
		return nil, fmt.Errorf("%w: cannot start a Sentinel group: the addrs backend talks to servers it does not control; "+
			"use the docker or process backend", fault.ErrUnsupported)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("node: StartSentinels on a closed cluster")
	}
	c.groups++
	prefix := "sg" + strconv.Itoa(c.groups)
	idx := c.nextIdx
	c.nextIdx++
	c.mu.Unlock()

	g := &SentinelGroup{c: c, opts: opts}
	ok := false
	defer func() {
		if !ok {
			g.Close()
		}
	}()
	p := persistence{appendOnly: c.opts.AppendOnly, fsync: c.opts.AppendFsync}
	master, err := c.startNode(ctx, idx, prefix+"m", p, nil, g.attachData)
	if err != nil {
		return nil, err
	}
	errs := make([]error, opts.Replicas)
	var wg sync.WaitGroup
	for i := range opts.Replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.addReplica(ctx, master, prefix+"r"+strconv.Itoa(i+1), g.attachData)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	host, port, _ := net.SplitHostPort(master.srv.peerAddr())
	name := opts.MasterName
	conf := fmt.Sprintf("sentinel monitor %s %s %s %d\n"+
		"sentinel down-after-milliseconds %s %d\n"+
		"sentinel failover-timeout %s %d\n",
		name, host, port, opts.Quorum,
		name, opts.DownAfter.Milliseconds(),
		name, opts.FailoverTimeout.Milliseconds())
	errs = make([]error, opts.Sentinels)
	for i := range opts.Sentinels {
		c.mu.Lock()
		idx := c.nextIdx
		c.nextIdx++
		c.mu.Unlock()
		sname := prefix + "s" + strconv.Itoa(i+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.startNode(ctx, idx, sname, persistence{},
				func(ctx context.Context) (server, error) { return c.be.startSentinel(ctx, idx, sname, conf) },
				g.attachSentinel)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.mu.Lock()
	slices.SortFunc(g.data, func(a, b *Node) int { return a.idx - b.idx })
	slices.SortFunc(g.sentinels, func(a, b *Node) int { return a.idx - b.idx })
	c.mu.Unlock()
	if err := g.waitReady(ctx); err != nil {
		return nil, err
	}
	ok = true
	return g, nil
}

// attachData and attachSentinel file a started node; they run under c.mu.
func (g *SentinelGroup) attachData(n *Node) {
	g.data = append(g.data, n)
	g.c.grouped = append(g.c.grouped, n)
}

func (g *SentinelGroup) attachSentinel(n *Node) {
	g.sentinels = append(g.sentinels, n)
	g.c.grouped = append(g.c.grouped, n)
}

// waitReady waits until each Sentinel sees the master up, every replica
// up, and every other Sentinel: only then can it take part in a failover.
func (g *SentinelGroup) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, g.opts.ReadyTimeout)
	defer cancel()
	for _, s := range g.Sentinels() {
		var last string
		for {
			m, err := redis.StringMap(s.do(ctx, "SENTINEL", "MASTER", g.opts.MasterName))
			if err != nil {
				last = err.Error()
			} else {
				last = fmt.Sprintf("flags %s, %s replicas of %d, %s other Sentinels of %d",
					m["flags"], m["num-slaves"], g.opts.Replicas, m["num-other-sentinels"], g.opts.Sentinels-1)
				if m["flags"] == "master" &&
					m["num-slaves"] == strconv.Itoa(g.opts.Replicas) &&
					m["num-other-sentinels"] == strconv.Itoa(g.opts.Sentinels-1) &&
					g.replicasUp(ctx, s) {
					break
				}
			}
			g.c.mu.Lock()
			closed := g.c.closed
			g.c.mu.Unlock()
			if closed {
				return fmt.Errorf("node %s: %w", s.name, errClosed)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %s: Sentinel not ready within %v (%s)\n%s",
					s.name, g.opts.ReadyTimeout, last, s.srv.logTail(15))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// replicasUp reports whether Sentinel s sees every replica it knows up.
func (g *SentinelGroup) replicasUp(ctx context.Context, s *Node) bool {
	rs, err := redis.Values(s.do(ctx, "SENTINEL", "REPLICAS", g.opts.MasterName))
	if err != nil || len(rs) == 0 {
		return false
	}
	for _, r := range rs {
		m, err := redis.StringMap(r, nil)
		if err != nil || m["flags"] != "slave" || m["master-link-status"] != "ok" {
			return false
		}
	}
	return true
}

// MasterName is the name the Sentinels know the master by.
func (g *SentinelGroup) MasterName() string { return g.opts.MasterName }

// Addrs returns the Sentinels' addresses, "host:port", as clients dial them.
func (g *SentinelGroup) Addrs() []string {
	var a []string
	for _, s := range g.Sentinels() {
		a = append(a, s.Addr())
	}
	return a
}

// Sentinels returns the Sentinels. They are nodes like the others: Dial
// and Do talk to them, and the faults apply. (On the process backend a
// partitioned Sentinel is cut off from clients and the other Sentinels,
// while its own connections to the data nodes stay up.)
func (g *SentinelGroup) Sentinels() []*Node {
	g.c.mu.Lock()
	defer g.c.mu.Unlock()
	return append([]*Node(nil), g.sentinels...)
}

// Nodes returns the data nodes: the master as started, then its replicas.
// Which one is the master now is Master's answer.
func (g *SentinelGroup) Nodes() []*Node {
	g.c.mu.Lock()
	defer g.c.mu.Unlock()
	return append([]*Node(nil), g.data...)
}

// MasterAddr asks every Sentinel for the master's address (SENTINEL
// GET-MASTER-ADDR-BY-NAME) and returns the one a majority of them give.
// Without a majority (a failover is under way, or too few Sentinels
// answer) it is an error listing the answers.
func (g *SentinelGroup) MasterAddr(ctx context.Context) (string, error) {
	sents := g.Sentinels()
	votes := map[string]int{}
	var answers []string
	for _, s := range sents {
		a, err := g.askMaster(ctx, s)
		if err != nil {
			answers = append(answers, s.name+": "+err.Error())
			continue
		}
		votes[a]++
		answers = append(answers, s.name+": "+a)
		if votes[a] > len(sents)/2 {
			return a, nil
		}
	}
	return "", fmt.Errorf("node: the Sentinels of %s do not agree on a master (%s)",
		g.opts.MasterName, strings.Join(answers, "; "))
}

// askMaster asks one Sentinel for the master's address.
func (g *SentinelGroup) askMaster(ctx context.Context, s *Node) (string, error) {
	v, err := redis.Strings(s.do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", g.opts.MasterName))
	if err != nil {
		return "", err
	}
	if len(v) != 2 {
		return "", fmt.Errorf("no master named %s", g.opts.MasterName)
	}
	return net.JoinHostPort(v[0], v[1]), nil
}

// Master returns the data node a majority of the Sentinels name as the
// master (see MasterAddr).
func (g *SentinelGroup) Master(ctx context.Context) (*Node, error) {
	a, err := g.MasterAddr(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range g.Nodes() {
		if n.srv.peerAddr() == a {
			return n, nil
		}
	}
	return nil, fmt.Errorf("node: the Sentinels of %s name %s, not a node of the group", g.opts.MasterName, a)
}

// WaitFailover waits until a majority of the Sentinels name a master other
// than from, and that node answers as a master; it returns it. ctx bounds
// the wait; its end is an error with the Sentinels' last answer and the
// tail of their logs.
func (g *SentinelGroup) WaitFailover(ctx context.Context, from *Node) (*Node, error) {
	var last error
	for {
		// Each round gets its own bound, so that a Sentinel that does not
		// answer (paused) cannot hold the wait past ctx.
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := g.Master(rctx)
		if err == nil && m != from {
			var role string
			if role, err = m.Role(rctx); err == nil && role == "master" {
				cancel()
				return m, nil
			}
			if err == nil {
				err = fmt.Errorf("node %s: named master by the Sentinels, but its role is %s", m.name, role)
			}
		}
		cancel()
		if err == nil {
			err = fmt.Errorf("node: the Sentinels still name %s the master", from.name)
		}
		last = err
		select {
		case <-ctx.Done():
			var logs []string
			for _, s := range g.Sentinels() {
				logs = append(logs, s.name+":\n"+s.srv.logTail(8))
			}
			return nil, fmt.Errorf("node: no failover away from %s: %w (%v)\n%s",
				from.name, ctx.Err(), last, strings.Join(logs, "\n"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close removes the group's Sentinels and data nodes. It is safe to call
// more than once, and the cluster's Close does it too.
func (g *SentinelGroup) Close() error {
	c := g.c
	c.mu.Lock()
	mine := append(append([]*Node(nil), g.data...), g.sentinels...)
	var gone []*Node
	c.grouped = slices.DeleteFunc(c.grouped, func(n *Node) bool {
		if slices.Contains(mine, n) {
			gone = append(gone, n)
			return true
		}
		return false
	})
	c.mu.Unlock()
	return closeNodes(gone)
}
