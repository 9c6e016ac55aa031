// What each request reads and writes on the ensemble, for a reduction that
// knows which steps commute (harness.Touch).

package zookeeper

import (
	"path"

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
