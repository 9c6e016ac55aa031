// The harness's side of the store: its node, its Driver, and a slot's
// Store, whose clients send each request as a step.

package memstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/harnesstest/memstore/memlock" // registers the family's strategies
)

// Name is the store: its strategies' family.
const Name = memlock.Family

func init() {
	harness.RegisterStore(&harness.Driver{
		Name:  Name,
		Title: "memstore",
		Rank:  99,
		// Installed is nil: the server is this package's, in the test's
		// process, and starts wherever the test runs; so is the backend.
		Start: func(ctx context.Context, _ string, count int) ([]harness.StoreNode, error) {
			return harness.StartEach(ctx, count, func(context.Context) (harness.StoreNode, error) {
				s, err := StartServer()
				if err != nil {
					return nil, err
				}
				return &Node{NodeName: "n1", Server: s}, nil
			})
		},
		Describe: func(first harness.StoreNode, more []harness.StoreNode) string {
			return "an in-process server on " + first.Addr()
		},
		Open: func(nodes []harness.Node, _ harness.OpenOptions) (harness.Store, error) {
			return newStore(nodes[0].(*Node))
		},
		MultiNode: "a story of Redlock's independent masters: memstore's locks run on one server",
		NA: func(sc *harness.Scenario) string {
			if sc.EndsSessions() {
				return "memstore's lock is data with a TTL, not a session's: pause-past-ttl tells its pause"
			}
			return ""
		},
		Tellings: map[string]harness.Telling{
			"pause-past-ttl": {
				Title: "a holder pauses past its TTL on memstore (no fencing)",
				Story: "C1 takes the lock with ACQ and stops for longer than its TTL. The server's clock passes the " +
					"TTL and the lock goes; C2's ACQ takes it and C2 writes. C1 wakes up and writes too: the " +
					"resource does not check the fence number ACQ gave each of them.",
				Source: "Martin Kleppmann, \"How to do distributed locking\" (2016)",
			},
		},
		Known:   map[string]map[string][]string{"pause-past-ttl": {memlock.CAS: {"c1 c1 c2 c2 c1"}}},
		Columns: []string{memlock.CAS, memlock.Del},
		PlayLevels: []harness.PlayLevel{{ID: "memstore-pause", Scenario: "pause-past-ttl", Strategy: memlock.CAS,
			Title: "A pause on the test store", Docs: "development.md",
			Goal: "C1 sleeps past its TTL. Make C1 write to the resource after C2, its successor, has written."}},
		Abbreviations: func(common string) string {
			return common + " ACQ takes the lock (key, token, TTL in ms) and answers its fence; REL releases it (key, token); DEL deletes it (key)."
		},
	})
}

// Node is a memstore server: one node of the harness, which no fault
// strikes (it implements none of harness/fault's interfaces, and the
// scenarios that fault the server are n/a on it).
type Node struct {
	NodeName string
	Server   *Server
}

// Name returns the node's name.
func (n *Node) Name() string { return n.NodeName }

// Addr returns the server's address.
func (n *Node) Addr() string { return n.Server.Addr() }

// Store returns Name.
func (n *Node) Store() string { return Name }

// Close stops the server.
func (n *Node) Close() error { return n.Server.Close() }

// store is a slot's store on one server: the key its runs lock, an admin
// connection outside the schedule, and the run's clients' connections.
type store struct {
	node *Node

	admin *Conn

	mu      sync.Mutex
	key     string
	clients []*scheduled
}

func newStore(n *Node) (*store, error) {
	return &store{node: n, admin: NewConn(n.Addr())}, nil
}

// adminDo sends a request outside the schedule.
func (s *store) adminDo(ctx context.Context, words ...string) (string, error) {
	return s.admin.Do(ctx, words...)
}

// Connect gives client c a Client whose every request is one of its steps.
func (s *store) Connect(c *harness.Client, cfg *locklab.Config) error {
	sc := &scheduled{c: c, conn: NewConn(s.node.Addr())}
	s.mu.Lock()
	s.clients = append(s.clients, sc)
	s.mu.Unlock()
	cfg.Store = sc
	return nil
}

// Key notes the key the slot's runs lock, which Empty resets.
func (s *store) Key(key string) string {
	s.mu.Lock()
	s.key = key
	s.mu.Unlock()
	return key
}

func (s *store) lockKey() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

// Empty closes the earlier run's connections and resets the key: its lock
// and its fence counter, so that each run's fences start at 1.
func (s *store) Empty(ctx context.Context) error {
	s.dropClients()
	_, err := s.adminDo(ctx, "RESET", s.lockKey())
	return err
}

// Advance passes d on the key's clock: its lock expires once its TTL is
// past.
func (s *store) Advance(ctx context.Context, _ int, d time.Duration) (int, error) {
	ans, err := s.adminDo(ctx, "TICK", s.lockKey(), strconv.FormatInt(d.Milliseconds(), 10))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(ans)
}

// Probe returns the holder's token, its Lease.Token, nil when nobody
// holds key: the harness's wrongful-release check compares it with the
// token of the client that holds the lock.
func (s *store) Probe(ctx context.Context, _ int, key string) (any, error) {
	ans, err := s.adminDo(ctx, "GET", key)
	if err != nil || ans == "NIL" {
		return nil, err
	}
	return strings.Fields(ans)[0], nil
}

// Crashed does nothing: a crashed holder's lock lives out its TTL.
func (s *store) Crashed(*harness.Client) {}

// Reconnect drops the clients' connections: their next requests dial.
func (s *store) Reconnect(int) {
	s.mu.Lock()
	clients := s.clients
	s.mu.Unlock()
	for _, sc := range clients {
		sc.drop()
	}
}

// Close resets the key and closes every connection.
func (s *store) Close(ctx context.Context) error {
	return errors.Join(s.Empty(ctx), s.admin.Close())
}

// dropClients closes the run's clients' connections and forgets them.
func (s *store) dropClients() {
	s.mu.Lock()
	clients := s.clients
	s.clients = nil
	s.mu.Unlock()
	for _, sc := range clients {
		sc.drop()
	}
}

var (
	_ harness.Store  = (*store)(nil)
	_ memlock.Client = (*Conn)(nil)
	_ memlock.Client = (*scheduled)(nil)
)

// scheduled is a client's Client: each request waits for the scheduler's
// grant (Client.SendTouching) before it goes out on the client's own
// connection, and its answer ends the step.
type scheduled struct {
	c    *harness.Client
	conn *Conn
}

// Do sends one request as a step of the client's, declared as reading and
// writing the lock of its key.
func (sc *scheduled) Do(ctx context.Context, words ...string) (string, error) {
	if len(words) < 2 {
		return "", errors.New("memstore: a request names its key")
	}
	args := make([]any, len(words)-1)
	for i, w := range words[1:] {
		args[i] = w
	}
	key := "key:" + words[1]
	step, err := sc.c.SendTouching(ctx, 1, words[0], args, &harness.Touch{Reads: []string{key}, Writes: []string{key}})
	if err != nil {
		return "", err
	}
	ans, err := sc.conn.Do(ctx, words...)
	if err != nil {
		step.Done(nil, err)
		return "", err
	}
	if step.LoseReply() {
		// The server did it; the connection drops before the answer.
		sc.drop()
		step.Done(ans, nil)
		return "", harness.ErrLostReply
	}
	step.Done(ans, nil)
	return ans, nil
}

// drop closes the client's connection: its next request dials again.
func (sc *scheduled) drop() { sc.conn.Close() }
