// Labels: how every renderer names what a history holds. A lease token is
// named after the client that wrote it ("c1's"), a timestamp lock's stamp
// after its offset from the harness's epoch ("@30.012s"), the lock key "K";
// anything else is cut to the width the renderer has room for.

package render

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/harness"
)

// labels names the values of one history.
type labels struct {
	owner map[string]string
}

// labelsOf maps each lease token written by exactly one client to a label
// for it ("c1's"). A value that several clients wrote (the counter "1" of
// the INCR locks) names nobody: it is shown as it is.
func labelsOf(h *harness.History) labels {
	who := map[string][]string{}
	for _, a := range h.Acquisitions {
		c := fmt.Sprintf("c%d", a.Client)
		if !slices.Contains(who[a.Token], c) {
			who[a.Token] = append(who[a.Token], c)
		}
	}
	out := map[string]string{}
	for t, cs := range who {
		if len(cs) == 1 {
			out[t] = cs[0] + "'s"
		}
	}
	return labels{owner: out}
}

// name is the label of a token or a stamp, quoted or not.
func (l labels) name(s string) (string, bool) {
	if o, ok := l.owner[s]; ok {
		return o, true
	}
	t := strings.Trim(s, `"`)
	if o, ok := l.owner[t]; ok {
		return o, true
	}
	return stampLabel(t)
}

// value labels a reply or a key's value: its name, else s cut to width
// with more marking the cut.
func (l labels) value(s string, width int, more string) string {
	if n, ok := l.name(s); ok {
		return n
	}
	return cut(s, width, more)
}

// args labels a command's arguments: the command as it is, tokens and
// stamps by name, the lock key as "K", the rest cut to width.
func (l labels) args(args []string, width int, more string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		n, ok := l.name(a)
		switch {
		case i == 0:
			out[i] = a
		case ok:
			out[i] = n
		case strings.HasPrefix(a, "lock:"):
			out[i] = "K"
		default:
			out[i] = cut(a, width, more)
		}
	}
	return out
}

// cut shortens s to n characters, the last one being more, when it is
// longer.
func cut(s string, n int, more string) string {
	r := []rune(s)
	if n < 2 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + more
}

// stampLabel shows a Unix time in milliseconds near harness.Epoch (a
// timestamp lock's stamp that no acquire claimed) as its offset from the
// epoch: "@30.012s".
func stampLabel(s string) (string, bool) {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return "", false
	}
	d := time.Duration(ms-harness.Epoch.UnixMilli()) * time.Millisecond
	if d < -24*time.Hour || d > 24*time.Hour {
		return "", false
	}
	return "@" + d.String(), true
}

// violationLine says what went wrong at e: the clients holding the lock at
// once, else the verdict's message when it points at e.
func violationLine(h *harness.History, e harness.Event) string {
	if len(e.Holders) > 1 {
		return clientList(e.Holders) + " hold the lock at once"
	}
	if h.Verdict.Step == e.Step && h.Verdict.Message != "" {
		return h.Verdict.Message
	}
	return e.Violation
}

// clientList is "c1 and c2" (and " and c3"...).
func clientList(ids []int) string {
	cs := make([]string, len(ids))
	for i, id := range ids {
		cs[i] = fmt.Sprintf("c%d", id)
	}
	return strings.Join(cs, " and ")
}
