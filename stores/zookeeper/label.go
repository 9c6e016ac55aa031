// How a ZooKeeper request and its answer show in a timeline: the
// operation as zkCli names it, its path with the lock's path as P, and a
// protected node's GUID as the client that made it.

package zookeeper

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/strategies/zklock"
)

// guidPattern finds the GUID of a protected node's name (_c_<GUID>-lock-).
var guidPattern = regexp.MustCompile(`_c_([0-9A-Za-z-]+?)-lock-`)

// label is how the timeline shows request q of client c.
func (s *zkStore) label(c *harness.Client, q request) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := guidPattern.FindStringSubmatch(q.path); m != nil {
		if _, ok := s.guids[m[1]]; !ok {
			s.guids[m[1]] = fmt.Sprintf("c%d", c.ID())
		}
	}
	path := s.shortLocked(q.path)
	watch := ""
	if q.watch {
		watch = " watch"
	}
	switch q.op {
	case opCreate, opCreate2:
		mode := ""
		if q.flags&flagEphemeral != 0 {
			mode += " -e"
		}
		if q.flags&flagSequential != 0 {
			mode += " -s"
		}
		return "create" + mode + " " + path
	case opDelete:
		return "delete " + path
	case opExists:
		return "exists " + path + watch
	case opGetData:
		return "get " + path + watch
	case opGetChildren, opGetChildren2:
		return "ls " + path + watch
	case opSetData:
		return "set " + path
	case opSync:
		return "sync " + path
	case opCheck:
		return "check " + path
	case opMulti:
		ops := make([]string, len(q.ops))
		for i, o := range q.ops {
			switch o.op {
			case opCheck:
				ops[i] = fmt.Sprintf("check %s v%d", s.shortLocked(o.path), o.version)
			case opSetData:
				ops[i] = "set " + s.shortLocked(o.path)
			default:
				ops[i] = fmt.Sprintf("op %d", o.op)
			}
		}
		return strings.TrimSpace("multi " + strings.Join(ops, ", "))
	case opClose:
		return "close session"
	}
	return fmt.Sprintf("op %d %s", q.op, path)
}

// replyLabel is how the timeline shows answer a to request q.
func (s *zkStore) replyLabel(q request, a reply) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch q.op {
	case opCreate:
		return s.shortLocked(a.path)
	case opCreate2:
		return fmt.Sprintf("%s @%d", s.shortLocked(a.path), a.czxid)
	case opExists, opGetData, opSetData:
		return fmt.Sprintf("@%d", a.czxid)
	case opGetChildren, opGetChildren2:
		// The server lists children in no order; the timeline lists a
		// recipe's queue in its order.
		children := slices.Clone(a.children)
		slices.SortFunc(children, func(x, y string) int {
			return cmp.Or(cmp.Compare(sequence(x), sequence(y)), cmp.Compare(x, y))
		})
		names := make([]string, len(children))
		for i, ch := range children {
			names[i] = s.guidLocked(ch)
		}
		return "[" + strings.Join(names, " ") + "]"
	}
	return "ok"
}

// shortLocked shows path with the lock's path as P and GUIDs by client.
// The caller holds s.mu.
func (s *zkStore) shortLocked(path string) string {
	if s.lockKey != "" {
		if path == resourcePath(s.lockKey) {
			return "R"
		}
		for _, name := range strategyNames {
			p := zklock.Path(name, s.lockKey)
			if path == p || strings.HasPrefix(path, p+"/") {
				path = "P" + path[len(p):]
				break
			}
		}
	}
	return s.guidLocked(path)
}

// guidLocked replaces the GUIDs in path by the clients that made them.
// The caller holds s.mu.
func (s *zkStore) guidLocked(path string) string {
	return guidPattern.ReplaceAllStringFunc(path, func(m string) string {
		g := guidPattern.FindStringSubmatch(m)[1]
		if who, ok := s.guids[g]; ok {
			return "_c_" + who + "-lock-"
		}
		return m
	})
}

// holder is how the server's column shows the queue's first node, name:
// the client that made it and its sequence number ("c2 #0").
func (s *zkStore) holder(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	who := s.makerLocked(name)
	if who == "" {
		who = "?"
	}
	n, err := strconv.ParseInt(sequence(name), 10, 64)
	if err != nil {
		return name
	}
	return fmt.Sprintf("%s #%d", who, n)
}

// maker is the client that made the protected node name ("c2"), by its
// GUID; "" when no client's create named it.
func (s *zkStore) maker(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.makerLocked(name)
}

// makerLocked is maker; the caller holds s.mu.
func (s *zkStore) makerLocked(name string) string {
	if m := guidPattern.FindStringSubmatch(name); m != nil {
		return s.guids[m[1]]
	}
	return ""
}
