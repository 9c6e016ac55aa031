// The history: the record of one run (every step's command, reply, notes,
// holders and key values; acquisitions, writes, wrongful releases) and the
// verdict the checkers reached. Renderers and checkers work on it alone.

package harness

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Event is one step of a run as it happened.
type Event struct {
	// Step numbers the steps of the run from 1.
	Step int `json:"step"`
	// Label is the step in the schedule text form ("c1", "c2@n1",
	// "time(+32s)", "crash(c3)").
	Label string `json:"label"`
	// Client is the client that acted (0 for an environment event).
	Client int `json:"client,omitempty"`
	// Node is the node the command went to (1-based; 0 for none).
	Node int `json:"node,omitempty"`
	// Command is the Redis command sent (a Lua script by its name, then its
	// keys and arguments: "EVALSHA", "set-nx-px.release", key, token), the
	// statement or request sent to another store, as it reads ("Txn if
	// create(P/L1)=0 then ..."), or the local action ("write", "sleep 16s").
	Command []string `json:"command,omitempty"`
	// Reply is the server's answer (or the error).
	Reply string `json:"reply,omitempty"`
	// Extra lists a command that ran inside the same step: the EVAL that
	// follows a NOSCRIPT answer to EVALSHA.
	Extra []string `json:"extra,omitempty"`
	// Notes are outcomes that became known in this step: "acquired",
	// "refused", "released", "release: not held", "crashed", ...
	Notes []string `json:"notes,omitempty"`
	// Holders are the clients inside the critical section after the step.
	Holders []int `json:"holders"`
	// Keys are the lock key's value on each node after the step, in runs
	// that record them ("-" for a missing key).
	Keys []string `json:"keys,omitempty"`
	// Violation names a property broken at this step.
	Violation string `json:"violation,omitempty"`
	// Touch is what the step read and wrote on its store, as the store
	// declared it (nil: undeclared, everything). Histories on disk leave
	// it out.
	Touch *Touch `json:"-"`
}

// Acquisition is a successful acquire.
type Acquisition struct {
	Client int    `json:"client"`
	Step   int    `json:"step"`
	Token  string `json:"token"`
	Fence  int64  `json:"fence"`
	// Seq orders acquisitions across clients, from 1.
	Seq int `json:"seq"`
}

// Write is a write to the protected resource.
type Write struct {
	Client   int   `json:"client"`
	Step     int   `json:"step"`
	Fence    int64 `json:"fence"`
	Accepted bool  `json:"accepted"`
	// Stale: a client that acquired after this one had already written.
	Stale bool `json:"stale"`
	// Seq is the writer's acquisition sequence number.
	Seq int `json:"seq"`
}

// WrongRelease is a release that removed another client's lock.
type WrongRelease struct {
	Client int `json:"client"`
	Victim int `json:"victim"`
	Step   int `json:"step"`
	Node   int `json:"node"`
}

// ClientInfo describes a client of the run.
type ClientInfo struct {
	ID      int    `json:"id"`
	Program string `json:"program"`
	// Probe marks the client the liveness check adds at the end of a run.
	Probe bool `json:"probe,omitempty"`
	// Acquired counts the client's successful acquires.
	Acquired int `json:"acquired"`
	// Attempts counts its calls of Acquire.
	Attempts int  `json:"attempts"`
	Crashed  bool `json:"crashed,omitempty"`
}

// History is the record of one run: what every step did and what the
// checkers concluded.
type History struct {
	Strategy string        `json:"strategy"`
	Scenario string        `json:"scenario"`
	Key      string        `json:"key"`
	TTL      time.Duration `json:"ttl_ns"`
	Nodes    []string      `json:"nodes"`
	Clients  []ClientInfo  `json:"clients"`
	// Schedule is every step that ran, in the text form: replaying it
	// reproduces the run.
	Schedule     string         `json:"schedule"`
	Events       []Event        `json:"events"`
	Acquisitions []Acquisition  `json:"acquisitions"`
	Writes       []Write        `json:"writes"`
	WrongRelease []WrongRelease `json:"wrong_releases"`
	// Probe is the liveness probe's result: nil when the run had none.
	Probe *bool `json:"probe_acquired,omitempty"`
	// ProbeTries is how many probe clients tried, each after a quiet TTL:
	// 2 when the first was refused.
	ProbeTries int `json:"probe_tries,omitempty"`
	// Truncated: the step bound ended the run before every client finished.
	Truncated bool `json:"truncated,omitempty"`
	// redundant: the explorer ended the run early, every step it could
	// take being one whose schedules run elsewhere (prefix.go).
	redundant bool
	// trace names the trace of the steps the explorer chose (traceKey).
	trace uint64
	// mirrored is how many alternatives the run left to their mirror
	// image (symmetry.go).
	mirrored int
	// Skipped lists steps of an explicit schedule that named a client with
	// nothing left to do; they were left out.
	Skipped []string `json:"skipped,omitempty"`
	Verdict Verdict  `json:"verdict"`
}

// JSON returns the history as indented JSON.
func (h *History) JSON() ([]byte, error) { return json.MarshalIndent(h, "", "  ") }

// Commands counts the Redis commands the clients sent.
func (h *History) Commands() int {
	n := 0
	for _, e := range h.Events {
		if e.Client > 0 && e.Node > 0 {
			n++
		}
	}
	return n
}

// CommandText is how a history shows an operation a store sent: its name
// and its arguments, each as FormatValue shows it.
func CommandText(name string, args []any) []string {
	out := []string{name}
	for _, a := range args {
		out = append(out, fmtValue(a))
	}
	return out
}

// FormatValue is how a history shows a value: an argument, a reply, or an
// element of one.
func FormatValue(v any) string { return fmtValue(v) }

// ErrorReply is an error a server answered in place of a reply (Redis's
// error replies): a history shows it as "ERR " and its text, where another
// error shows as "error: " and its text. A store records its server's
// error replies as ErrorReply, alone or inside a reply.
type ErrorReply string

func (e ErrorReply) Error() string { return string(e) }

func fmtValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "(nil)"
	case []byte:
		return string(x)
	case string:
		return x
	case int64:
		return fmt.Sprint(x)
	case ErrorReply:
		return "ERR " + string(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fmtValue(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

func fmtReply(v any, err error) string {
	if err != nil {
		if e, ok := err.(ErrorReply); ok {
			return "ERR " + string(e)
		}
		return "error: " + err.Error()
	}
	if v == nil {
		return "(nil)"
	}
	if s, ok := v.(string); ok {
		return s
	}
	if b, ok := v.([]byte); ok {
		return fmt.Sprintf("%q", b)
	}
	return fmtValue(v)
}
