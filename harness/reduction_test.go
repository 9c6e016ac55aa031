package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
)

// genCommand is one command of a generated program: op on key k of two
// (GET, SET to the client's own value, INCR, DEL), or STAMP: the client
// reads its clock and SETs k to the milliseconds it read.
type genCommand struct {
	op string
	k  int
}

// genLock is a lock made of generated commands: Acquire runs its own
// commands, then SET key NX; Release runs its own, then DEL key.
type genLock struct {
	cfg              locklab.Config
	id               int
	acquire, release []genCommand
	// expires: the lock key is set with the acquire's TTL (SET NX PX).
	expires bool
}

func (g *genLock) run(ctx context.Context, key string, cmds []genCommand) error {
	c, err := g.cfg.Pool.GetContext(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, cmd := range cmds {
		k := fmt.Sprintf("%s:%d", key, cmd.k)
		switch cmd.op {
		case "SET":
			_, err = c.Do("SET", k, fmt.Sprintf("c%d", g.id))
		case "STAMP":
			_, err = c.Do("SET", k, g.cfg.Clock.Now().UnixMilli())
		default:
			_, err = c.Do(cmd.op, k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (g *genLock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	if err := g.run(ctx, key, g.acquire); err != nil {
		return locklab.Lease{}, err
	}
	c, err := g.cfg.Pool.GetContext(ctx)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	args := []any{key, g.id, "NX"}
	if g.expires {
		args = append(args, "PX", ttl.Milliseconds())
	}
	ok, err := redis.String(c.Do("SET", args...))
	if err == redis.ErrNil || ok != "OK" {
		return locklab.Lease{}, locklab.ErrNotAcquired
	}
	return locklab.Lease{Key: key, Token: fmt.Sprint(g.id), Until: g.cfg.Clock.Now().Add(time.Hour)}, err
}

func (g *genLock) Release(ctx context.Context, l locklab.Lease) error {
	if err := g.run(ctx, l.Key, g.release); err != nil {
		return err
	}
	c, err := g.cfg.Pool.GetContext(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Do("DEL", l.Key)
	return err
}

// genCase is a case of clients clients, each running acquire, write,
// release with a lock of commands generated from seed (of ops, or of
// every kind).
func genCase(seed uint64, clients int, ops ...string) Case {
	rng := rand.New(rand.NewPCG(seed, 1))
	if len(ops) == 0 {
		ops = []string{"GET", "SET", "INCR", "DEL", "STAMP"}
	}
	gen := func(most int) []genCommand {
		cmds := make([]genCommand, rng.IntN(most+1))
		for i := range cmds {
			cmds[i] = genCommand{op: ops[rng.IntN(len(ops))], k: rng.IntN(2)}
		}
		return cmds
	}
	locks := make([]*genLock, clients)
	for i := range locks {
		locks[i] = &genLock{id: i + 1, acquire: gen(2), release: gen(1)}
	}
	texts := make([]string, clients)
	for i := range texts {
		texts[i] = "acquire write release"
	}
	sc := &Scenario{Name: fmt.Sprintf("generated-%d", seed), Property: MutualExclusion, Programs: progs(texts...)}
	next := 0
	return Custom(sc, "generated", func(cfg locklab.Config) (locklab.Locker, error) {
		// The harness builds client i's lock i-th.
		g := *locks[next%clients]
		next++
		g.cfg = cfg
		return &g, nil
	})
}

// endStates explores c and returns the end states its runs reach, each
// the values of the lock key and both keys, the resource's history (who
// wrote, accepted or not) and the order of acquisitions. Runs the
// reduction ended early (redundant) have no end state.
func endStates(t *testing.T, c Case, nodes []Node, plain bool) (map[string]bool, *ExploreResult) {
	return namedEndStates(t, c, nodes, plain, 0)
}

// idMark marks a client's id in an end state: "c2", or the lock key's
// value, 2.
var idMark = regexp.MustCompile(`«(\d)»`)

// idValue is a key's value that names a client: "c2", or 2.
var idValue = regexp.MustCompile(`^c?(\d)$`)

// namedEndStates is endStates, up to the names of the first clients
// clients when that is not 0: each state the least, over every renaming
// of those clients, of the state with their ids renamed.
func namedEndStates(t *testing.T, c Case, nodes []Node, plain bool, clients int) (map[string]bool, *ExploreResult) {
	t.Helper()
	var mu sync.Mutex
	states := map[string]bool{}
	id := func(n int) string {
		if clients == 0 {
			return "c" + strconv.Itoa(n)
		}
		return "«" + strconv.Itoa(n) + "»"
	}
	observeRun = func(h *History, get func(string) (any, error)) {
		if h.redundant {
			return
		}
		var b strings.Builder
		for i, k := range []string{h.Key, h.Key + ":0", h.Key + ":1"} {
			v, err := get(k)
			if err != nil {
				t.Errorf("reading %s: %v", k, err)
			}
			s := fmtValue(v)
			// The lock key holds its holder's id, the others a client's
			// "cN" or a count.
			if m := idValue.FindStringSubmatch(s); clients > 0 && m != nil && (i == 0 || s[0] == 'c') {
				s = "«" + m[1] + "»"
			}
			fmt.Fprintf(&b, "%s=%s ", k[len(h.Key):], s)
		}
		for _, w := range h.Writes {
			fmt.Fprintf(&b, "w(%s,%v) ", id(w.Client), w.Accepted)
		}
		for _, a := range h.Acquisitions {
			fmt.Fprintf(&b, "a(%s) ", id(a.Client))
		}
		state := b.String()
		if clients > 0 {
			least := ""
			for _, perm := range permutations(clients) {
				s := idMark.ReplaceAllStringFunc(state, func(m string) string {
					n, _ := strconv.Atoi(idMark.FindStringSubmatch(m)[1])
					return "c" + strconv.Itoa(perm[n-1])
				})
				if least == "" || s < least {
					least = s
				}
			}
			state = least
		}
		mu.Lock()
		states[state] = true
		mu.Unlock()
	}
	defer func() { observeRun = nil }()
	res, err := Explore(context.Background(), ExploreOptions{Case: c, Nodes: nodes, NoReduction: plain, MaxSchedules: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete {
		t.Fatalf("%s: not complete after %d schedules", c.Scenario.Name, res.Schedules)
	}
	return states, res
}

// sameEndStates fails t for each end state the plain walk reaches and the
// reduced one does not, and the other way round.
func sameEndStates(t *testing.T, seed uint64, plain, reduced map[string]bool, pr, rr *ExploreResult) {
	t.Helper()
	for s := range plain {
		if !reduced[s] {
			t.Errorf("seed %d: the reduced walk (%d schedules) misses end state %s of the plain walk (%d)", seed, rr.Schedules, s, pr.Schedules)
		}
	}
	for s := range reduced {
		if !plain[s] {
			t.Errorf("seed %d: the reduced walk reaches %s, which the plain walk does not", seed, s)
		}
	}
}

// missedStates counts the end states of plain that got does not reach.
func missedStates(plain, got map[string]bool) int {
	n := 0
	for s := range plain {
		if !got[s] {
			n++
		}
	}
	return n
}

// TestReductionReachesEveryEndState: on locks of generated commands (keys
// read, written, incremented, deleted; clocks read and stored) run by
// three clients on a real server, the reduced walk reaches every end state
// the plain walk reaches, and runs fewer schedules; with the keys'
// dependencies left out on purpose, or the clock's, it misses some.
func TestReductionReachesEveryEndState(t *testing.T) {
	if testing.Short() {
		t.Skip("explores generated programs twice each")
	}
	nodes := nodesOf(redistest.Start(t, 1))
	seeds := []uint64{1, 2, 3, 4, 5, 6}
	var plainRuns, reducedRuns int
	plainStates := map[uint64]map[string]bool{}
	for _, seed := range seeds {
		plain, pr := endStates(t, genCase(seed, 3), nodes, true)
		reduced, rr := endStates(t, genCase(seed, 3), nodes, false)
		plainStates[seed] = plain
		plainRuns += pr.Schedules
		reducedRuns += rr.Schedules
		sameEndStates(t, seed, plain, reduced, pr, rr)
		t.Logf("seed %d: %d end states; plain %d schedules, reduced %d (%d ended early)", seed, len(plain), pr.Schedules, rr.Schedules, rr.Redundant)
	}
	if reducedRuns >= plainRuns {
		t.Errorf("the reduction ran %d schedules, the plain walk %d", reducedRuns, plainRuns)
	}
	for _, left := range []string{"key:", touchClock} {
		t.Run("without "+left, func(t *testing.T) {
			missed := 0
			for _, seed := range seeds {
				c := func() Case { return genCase(seed, 3) }
				if left == touchClock {
					// Clocks read and stored, keys read: only the
					// clock orders these steps.
					c = func() Case { return genCase(seed, 3, "STAMP", "GET") }
				}
				plain := plainStates[seed]
				if left == touchClock {
					plain, _ = endStates(t, c(), nodes, true)
				}
				forget = func(name string) bool { return strings.HasPrefix(name, left) }
				reduced, _ := endStates(t, c(), nodes, false)
				forget = nil
				missed += missedStates(plain, reduced)
			}
			if missed == 0 {
				t.Errorf("with %s left out, the reduced walk still reaches every end state", left)
			}
		})
	}
}

// partitioned is c with client 1 cut off and reconnected: isolate(c1)
// and rejoin(c1) may each fall between any two steps, rejoin after
// isolate.
func partitioned(c Case) Case {
	c.Scenario.Faults = []string{"isolate(c1)", "rejoin(c1)"}
	c.Scenario.FaultAfter = map[string]string{"rejoin(c1)": "isolate(c1)"}
	c.Scenario.MaxFaults = 2
	return c
}

// TestReductionAcrossPartitions: an isolate or a rejoin writes only its
// client's network (effect.go), so the steps of the other clients sleep
// across it, and the step a run took sleeps in the run of the fault it
// left (pendingFault). On generated locks of two clients, with client 1
// cut off and reconnected anywhere, the reduced walk reaches every end
// state of the plain walk in fewer schedules, and its runs fall into as
// many traces; with the network's dependency left out on purpose (a
// client's steps do not read whether it is cut off), it misses end
// states. With the run's dependency left out (a client's last step does
// not end the choices a fault is taken at: touchRunning), it misses
// traces: a rejoin between client 1's last step and client 2's, which no
// schedule taking client 2's last step earlier can have.
func TestReductionAcrossPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("explores generated programs four times each")
	}
	nodes := nodesOf(redistest.Start(t, 1))
	seeds := []uint64{1, 2, 3, 4}
	var plainRuns, reducedRuns, missed, missedTraces int
	for _, seed := range seeds {
		c := func() Case { return partitioned(genCase(seed, 2, "GET", "SET", "DEL")) }
		plain, pr := endStates(t, c(), nodes, true)
		reduced, rr := endStates(t, c(), nodes, false)
		plainRuns += pr.Schedules
		reducedRuns += rr.Schedules
		sameEndStates(t, seed, plain, reduced, pr, rr)
		if rr.Traces != pr.Traces {
			t.Errorf("seed %d: the reduced walk's runs fall into %d traces, the plain walk's %d", seed, rr.Traces, pr.Traces)
		}
		forget = func(name string) bool { return strings.HasPrefix(name, "harness:net:") }
		blind, _ := endStates(t, c(), nodes, false)
		// The traces are named by the same independence on both walks.
		forget = func(name string) bool { return name == touchRunning }
		_, rp := endStates(t, c(), nodes, true)
		_, rb := endStates(t, c(), nodes, false)
		forget = nil
		missed += missedStates(plain, blind)
		missedTraces += rp.Traces - rb.Traces
		t.Logf("seed %d: %d end states, %d traces; plain %d schedules, reduced %d (%d ended early)", seed, len(plain), pr.Traces, pr.Schedules, rr.Schedules, rr.Redundant)
	}
	if reducedRuns >= plainRuns {
		t.Errorf("the reduction ran %d schedules, the plain walk %d", reducedRuns, plainRuns)
	}
	if missed == 0 {
		t.Error("with the network's dependency left out, the reduced walk still reaches every end state")
	}
	if missedTraces == 0 {
		t.Errorf("with %s left out, the reduced walk's runs still fall into every trace of the plain walk's", touchRunning)
	}
}

// paused is c with client 1 stopped past the lock's TTL: pause(c1), time
// and resume(c1) may each fall between any two steps, in that order, and
// the lock key expires (SET NX PX), so where the pause falls decides who
// holds the lock when.
func paused(c Case) Case {
	c.Scenario.Faults = []string{"pause(c1)", "time", "resume(c1)"}
	c.Scenario.FaultAfter = map[string]string{"time": "pause(c1)", "resume(c1)": "time"}
	c.Scenario.MaxFaults = 3
	one := c.Factory
	c.Factory = func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := one(cfg)
		if err == nil {
			l.(*genLock).expires = true
		}
		return l, err
	}
	return c
}

// TestReductionAcrossPauses: a pause, like an isolate, writes only its
// client's reach (reachEvent), so the other clients' steps sleep across
// it. On generated locks of two clients whose lock key expires,
// with client 1 stopped past the TTL anywhere, the reduced walk reaches
// every end state of the plain walk, in fewer schedules than with pauses
// taken as conflicting with every step.
func TestReductionAcrossPauses(t *testing.T) {
	if testing.Short() {
		t.Skip("explores generated programs three times each")
	}
	nodes := nodesOf(redistest.Start(t, 1))
	seeds := []uint64{1, 2, 3, 4}
	var plainRuns, reducedRuns, conflictingRuns int
	for _, seed := range seeds {
		c := func() Case { return paused(genCase(seed, 2, "GET", "SET", "DEL")) }
		plain, pr := endStates(t, c(), nodes, true)
		reduced, rr := endStates(t, c(), nodes, false)
		sameEndStates(t, seed, plain, reduced, pr, rr)
		pausesConflict = true
		_, cr := endStates(t, c(), nodes, false)
		pausesConflict = false
		plainRuns += pr.Schedules
		reducedRuns += rr.Schedules
		conflictingRuns += cr.Schedules
		t.Logf("seed %d: %d end states; plain %d schedules, reduced %d (%d ended early), with pauses conflicting %d", seed, len(plain), pr.Schedules, rr.Schedules, rr.Redundant, cr.Schedules)
	}
	if reducedRuns >= conflictingRuns || conflictingRuns >= plainRuns {
		t.Errorf("schedules: plain %d, pauses conflicting %d, reduced %d", plainRuns, conflictingRuns, reducedRuns)
	}
}

// genSameCase is genCase with one generated lock for every client: the
// same commands, each client's lock told apart only by its id (the order
// the harness built it in), so that the clients are interchangeable.
func genSameCase(seed uint64, clients int, ops ...string) Case {
	c := genCase(seed, 1, ops...)
	one := c.Factory
	next := 0
	c.Scenario.Programs = progs(slices.Repeat([]string{"acquire write release"}, clients)...)
	c.Factory = func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := one(cfg)
		if err != nil {
			return nil, err
		}
		next++
		l.(*genLock).id = (next-1)%clients + 1
		return l, nil
	}
	c.Symmetric = true
	return c
}

// permutations returns every order of 1..n.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := slices.Insert(slices.Clone(p), i, n)
			out = append(out, q)
		}
	}
	return out
}

// TestSymmetryReachesEveryEndState: three clients that run one generated
// lock are interchangeable; with the symmetry, the reduced walk reaches
// every end state of the plain walk up to the clients' names, and runs
// fewer schedules than without it. Claimed between clients whose locks
// differ (each client a lock of its own commands), it misses some.
func TestSymmetryReachesEveryEndState(t *testing.T) {
	if testing.Short() {
		t.Skip("explores generated programs three times each")
	}
	nodes := nodesOf(redistest.Start(t, 1))
	ops := []string{"GET", "SET", "INCR", "DEL"}
	seeds := []uint64{1, 2, 3, 4}
	var without, with int
	for _, seed := range seeds {
		plain, pr := namedEndStates(t, genSameCase(seed, 3, ops...), nodes, true, 3)
		nosym := genSameCase(seed, 3, ops...)
		nosym.Symmetric = false
		_, nr := namedEndStates(t, nosym, nodes, false, 3)
		reduced, rr := namedEndStates(t, genSameCase(seed, 3, ops...), nodes, false, 3)
		without += nr.Schedules
		with += rr.Schedules
		sameEndStates(t, seed, plain, reduced, pr, rr)
		t.Logf("seed %d: %d end states up to names; plain %d schedules, reduced %d, with the symmetry %d", seed, len(plain), pr.Schedules, nr.Schedules, rr.Schedules)
	}
	if with >= without {
		t.Errorf("with the symmetry the walk ran %d schedules, without it %d", with, without)
	}
	t.Run("between clients that differ", func(t *testing.T) {
		missed := 0
		for _, seed := range seeds {
			plain, _ := namedEndStates(t, genCase(seed, 3, ops...), nodes, true, 3)
			c := genCase(seed, 3, ops...)
			c.Symmetric = true
			claimed, _ := namedEndStates(t, c, nodes, false, 3)
			missed += missedStates(plain, claimed)
		}
		if missed == 0 {
			t.Error("with a symmetry claimed between clients whose locks differ, the walk still reaches every end state")
		}
	})
}
