// Schedules: the steps a run takes, client steps and events, with their
// typed kinds and the text form ("c3 time c1 c2 crash(c1)").

package harness

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Step is one entry of a schedule: either "client C sends its next command"
// (Kind StepClient, optionally to node Node when the client has commands outstanding
// on several nodes) or an environment event.
//
// Event kinds and their text form:
//
//	c1          client 1 performs its next action (a Redis command or a write)
//	c1@n2       client 1's outstanding command to node 2 (Redlock fan-out)
//	time        time passes beyond the TTL: clocks advance, TTL keys expire
//	time(+5s)   time passes by 5s: clocks advance, TTLs shrink by 5s
//	crash(c1)   client 1 crashes after its current command
//	pause(c1)   client 1 stops being scheduled until resume(c1)
//	resume(c1)
//	skew(c1,+40s)  client 1's clock jumps by +40s (or -40s)
//	isolate(c1) rejoin(c1)  client 1 is cut off from every node (its
//	            commands fail as unreachable) and comes back
//	lose(c1)    client 1's next request runs on the server, and its reply
//	            is lost with the connection: the client sees it drop
//	terminate(c1)  the server ends client 1's sessions (an administrator's
//	            kill, an idle-session timeout): what they hold ends with
//	            them, and client 1 learns it at its next request
//	expire(n1)  node 1's clock jumps: every key with a TTL expires there
//	kill(n1) restart(n1) restart(n1,keep) pause(n1) resume(n1)
//	partition(n1) heal(n1) failover(n1)   node faults
//	restart(n1,delayed)  node 1 goes down, stays down while time passes
//	            beyond the TTL (as "time"), and rejoins empty
//	lag(n1) wipe(n1)  a member of node 1, a replicated cluster, lags
//	            (killed), and later another comes back emptied while
//	            the leader is down (fault.MemberLoss)
type Step struct {
	Kind   StepKind
	Client int
	Node   int
	Dur    time.Duration
	Keep   bool
	// Delayed: a restart that rejoins only after the TTL has passed.
	Delayed bool
}

// StepKind is what a step does. A client step is StepClient; every other
// kind is an event, on a client or on a node.
type StepKind string

// The step kinds.
const (
	StepClient StepKind = "c"
	StepTime   StepKind = "time"
	// Events on a client.
	StepCrash   StepKind = "crash"
	StepPause   StepKind = "pause"
	StepResume  StepKind = "resume"
	StepSkew    StepKind = "skew"
	StepIsolate StepKind = "isolate"
	StepRejoin  StepKind = "rejoin"
	// StepTerminate: the server ends the client's sessions (Terminator).
	StepTerminate StepKind = "terminate"
	// StepLose: the reply to the client's next request is lost
	// (Sent.LoseReply).
	StepLose StepKind = "lose"
	// Events on a node. A node's pause and resume are written pause(nN)
	// and resume(nN).
	StepExpire     StepKind = "expire"
	StepKill       StepKind = "kill"
	StepRestart    StepKind = "restart"
	StepNodePause  StepKind = "npause"
	StepNodeResume StepKind = "nresume"
	StepPartition  StepKind = "partition"
	StepHeal       StepKind = "heal"
	StepFailover   StepKind = "failover"
	// StepLag and StepWipe begin and end a cluster's fault.MemberLoss.
	StepLag  StepKind = "lag"
	StepWipe StepKind = "wipe"
)

// Schedule is an ordered list of steps.
type Schedule []Step

var clientEvents = map[StepKind]bool{StepCrash: true, StepPause: true, StepResume: true, StepSkew: true,
	StepIsolate: true, StepRejoin: true, StepTerminate: true, StepLose: true}
var nodeEvents = map[StepKind]bool{StepExpire: true, StepKill: true, StepRestart: true, StepNodePause: true,
	StepNodeResume: true, StepPartition: true, StepHeal: true, StepFailover: true, StepLag: true, StepWipe: true}

// IsClient reports whether s is a client step (not an event).
func (s Step) IsClient() bool { return s.Kind == StepClient }

// String prints s in the schedule text form.
func (s Step) String() string {
	switch {
	case s.Kind == StepClient:
		if s.Node > 0 {
			return fmt.Sprintf("c%d@n%d", s.Client, s.Node)
		}
		return fmt.Sprintf("c%d", s.Client)
	case s.Kind == StepTime:
		if s.Dur == 0 {
			return "time"
		}
		return "time(" + signed(s.Dur) + ")"
	case s.Kind == StepSkew:
		return fmt.Sprintf("skew(c%d,%s)", s.Client, signed(s.Dur))
	case clientEvents[s.Kind]:
		return fmt.Sprintf("%s(c%d)", s.Kind, s.Client)
	case s.Kind == StepNodePause:
		return fmt.Sprintf("pause(n%d)", s.Node)
	case s.Kind == StepNodeResume:
		return fmt.Sprintf("resume(n%d)", s.Node)
	case s.Kind == StepRestart && s.Keep:
		return fmt.Sprintf("restart(n%d,keep)", s.Node)
	case s.Kind == StepRestart && s.Delayed:
		return fmt.Sprintf("restart(n%d,delayed)", s.Node)
	case nodeEvents[s.Kind]:
		return fmt.Sprintf("%s(n%d)", s.Kind, s.Node)
	}
	return "?" + string(s.Kind)
}

func signed(d time.Duration) string {
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

// String prints the schedule as space-separated steps.
func (s Schedule) String() string {
	parts := make([]string, len(s))
	for i, st := range s {
		parts[i] = st.String()
	}
	return strings.Join(parts, " ")
}

// ParseSchedule reads the text form: steps separated by white space or
// commas (outside parentheses); '#' starts a comment that runs to the end of
// the line.
func ParseSchedule(text string) (Schedule, error) {
	var out Schedule
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, tok := range splitTokens(line) {
			st, err := parseStep(tok)
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
	}
	return out, nil
}

func splitTokens(line string) []string {
	var toks []string
	depth, start := 0, -1
	for i, r := range line {
		sep := depth == 0 && (r == ' ' || r == '\t' || r == ',' || r == '\r')
		switch {
		case sep:
			if start >= 0 {
				toks = append(toks, line[start:i])
				start = -1
			}
			continue
		case r == '(':
			depth++
		case r == ')':
			depth--
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		toks = append(toks, line[start:])
	}
	return toks
}

func parseRef(s string, prefix byte) (int, error) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != prefix {
		return 0, fmt.Errorf("want %c<number>, got %q", prefix, s)
	}
	n, err := strconv.Atoi(s[1:])
	if err == nil && n < 1 {
		what := "clients"
		if prefix == 'n' {
			what = "nodes"
		}
		return 0, fmt.Errorf("%s are numbered from %c1", what, prefix)
	}
	if err != nil {
		return 0, fmt.Errorf("want %c<number>, got %q", prefix, s)
	}
	return n, nil
}

func parseSigned(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
	if err != nil {
		return 0, fmt.Errorf("bad duration %q", s)
	}
	return d, nil
}

// parseStep reads one step in the text form.
func parseStep(tok string) (Step, error) {
	tok = strings.TrimSpace(tok)
	bad := func(err error) (Step, error) { return Step{}, fmt.Errorf("step %q: %w", tok, err) }
	if tok == "time" {
		return Step{Kind: StepTime}, nil
	}
	open := strings.IndexByte(tok, '(')
	if open < 0 {
		cl, nd, hasNode := strings.Cut(tok, "@")
		c, err := parseRef(cl, 'c')
		if err != nil {
			return bad(err)
		}
		st := Step{Kind: StepClient, Client: c}
		if hasNode {
			if st.Node, err = parseRef(nd, 'n'); err != nil {
				return bad(err)
			}
		}
		return st, nil
	}
	if !strings.HasSuffix(tok, ")") {
		return bad(fmt.Errorf("missing ')'"))
	}
	name, inner := tok[:open], tok[open+1:len(tok)-1]
	args := strings.Split(inner, ",")
	switch {
	case name == "time":
		d, err := parseSigned(inner)
		if err != nil {
			return bad(err)
		}
		return Step{Kind: StepTime, Dur: d}, nil
	case name == "skew":
		if len(args) != 2 {
			return bad(fmt.Errorf("want skew(cN,±dur)"))
		}
		c, err := parseRef(args[0], 'c')
		if err != nil {
			return bad(err)
		}
		d, err := parseSigned(args[1])
		if err != nil {
			return bad(err)
		}
		return Step{Kind: StepSkew, Client: c, Dur: d}, nil
	case (name == "pause" || name == "resume") && strings.HasPrefix(strings.TrimSpace(inner), "n"):
		n, err := parseRef(inner, 'n')
		if err != nil {
			return bad(err)
		}
		return Step{Kind: StepKind("n" + name), Node: n}, nil
	case clientEvents[StepKind(name)]:
		c, err := parseRef(inner, 'c')
		if err != nil {
			return bad(err)
		}
		return Step{Kind: StepKind(name), Client: c}, nil
	case nodeEvents[StepKind(name)] && name != "npause" && name != "nresume":
		n, err := parseRef(args[0], 'n')
		if err != nil {
			return bad(err)
		}
		st := Step{Kind: StepKind(name), Node: n}
		switch {
		case len(args) == 2 && name == "restart" && strings.TrimSpace(args[1]) == "keep":
			st.Keep = true
		case len(args) == 2 && name == "restart" && strings.TrimSpace(args[1]) == "delayed":
			st.Delayed = true
		case len(args) != 1:
			return bad(fmt.Errorf("unexpected arguments"))
		}
		return st, nil
	}
	return bad(fmt.Errorf("unknown step kind %q", name))
}
