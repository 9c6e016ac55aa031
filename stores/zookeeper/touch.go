// What each request reads and writes on the ensemble, for a reduction that
// knows which steps commute (harness.Touch).

package zookeeper

import (
	"maps"
	"path"
	"slices"
	"time"

	"github.com/locklab/locklab/harness"
)

// The resources a request touches: a node's existence and data ("node:"
// and its path), a node's list of children ("children:" and its path),
// and the ensemble's transaction id, which every write moves and which a
// node's czxid, a lock's fence, takes: two writes in the other order give
// other fences.
const zxid = "zxid"

func nodeRes(p string) string     { return "node:" + p }
func childrenRes(p string) string { return "children:" + p }

// touches is what request q reads and writes; nil (everything) for a
// request the store does not know.
func touches(q request) *harness.Touch {
	parent := childrenRes(path.Dir(q.path))
	switch q.op {
	case opCreate, opCreate2:
		// A sequential create makes a node of a name no other request
		// can name before its answer: it writes its parent's list.
		w := []string{parent, zxid}
		if q.flags&flagSequential == 0 {
			w = append(w, nodeRes(q.path))
		}
		return &harness.Touch{Writes: w}
	case opDelete:
		return &harness.Touch{Writes: []string{nodeRes(q.path), parent, zxid}}
	case opSetData:
		return &harness.Touch{Writes: []string{nodeRes(q.path), zxid}}
	case opExists, opGetData:
		return &harness.Touch{Reads: []string{nodeRes(q.path)}}
	case opGetChildren, opGetChildren2:
		return &harness.Touch{Reads: []string{childrenRes(q.path)}}
	}
	return nil
}

// stable names what t touches the same way in every run: a protected
// node's GUID, which go-zookeeper draws at random for zk-golib, becomes
// the client that made it (as the timeline shows it), so that a step of
// one run compares with a step of another.
func (s *zkStore) stable(t *harness.Touch) *harness.Touch {
	if t == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := func(ns []string) []string {
		out := make([]string, len(ns))
		for i, n := range ns {
			out[i] = s.guidLocked(n)
		}
		return out
	}
	return &harness.Touch{Reads: name(t.Reads), Writes: name(t.Writes)}
}

// TimeTouch is what a time step of d does on the ensemble (Advance): it
// ends the session of each client the servers would hear nothing from for
// the session's timeout by its end (crashed, cut off or paused: silent now
// and for long enough before), as the leader would. The session's end is a
// transaction, and so is the new session the client's connection opens
// after it: the step moves the zxid. The end deletes the session's
// ephemeral nodes: it writes each node the client's session created (the
// ones already gone too: what it writes is a superset) and its parent's
// list of children. And the client's next request fails, or runs on its
// new session, which the harness names as its reach. A step that ends no
// session touches nothing on the servers: the store's clock is read by no
// request.
//
// Which sessions end depends on which clients are silent, which only an
// event changes, and on how long each was silent at the earlier time steps
// and sleeps (events, and sleeps touch everything); the nodes a session
// owns change only with its own client's requests, which read its reach,
// or with another client's delete of one of them, which writes the node
// the step writes: another client's step that touches none of the names
// leaves the step's footprint and what it does as they are. The wakes of
// the clients that wait on a watch of those nodes are the harness's to
// see (a waiting client makes the step touch everything, harness.run's
// timeTouch).
var _ harness.TimeToucher = (*zkStore)(nil)

func (s *zkStore) TimeTouch(d time.Duration) (*harness.Touch, []*harness.Client) {
	s.mu.Lock()
	clients := slices.Clone(s.clients)
	s.mu.Unlock()
	var ended []*harness.Client
	var owned []string
	for _, cl := range clients {
		// Silent takes the run's lock: asked outside the client's.
		silent := cl.c.Silent()
		cl.mu.Lock()
		due := silent && cl.silent+d >= harness.TTL && cl.sess.id != 0
		owns := slices.Clone(cl.owns)
		cl.mu.Unlock()
		if due {
			ended = append(ended, cl.c)
			owned = append(owned, owns...)
		}
	}
	if len(ended) == 0 {
		return &harness.Touch{}, nil
	}
	writes := map[string]bool{zxid: true}
	for _, p := range owned {
		writes[nodeRes(p)] = true
		writes[childrenRes(path.Dir(p))] = true
	}
	slices.SortFunc(ended, func(a, b *harness.Client) int { return a.ID() - b.ID() })
	return s.stable(&harness.Touch{Writes: slices.Sorted(maps.Keys(writes))}), ended
}
