// Labels: how every renderer names what a history holds. A lease token is
// named after the client that wrote it ("c1's"), a timestamp lock's stamp
// after its offset from the harness's epoch ("@30.012s"), the lock key "K"
// (also inside another key: "{K}:fence"); an opaque value (a random token, a
// long number) is cut to the width the renderer has room for, and words
// stay whole.

package render

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/harness"
)

// labels names the values of one history.
type labels struct {
	owner map[string]string
	// key is the lock key.
	key string
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
	return labels{owner: out, key: h.Key}
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

// args labels a command's arguments: the command as it is, and each
// argument as phrase labels it.
func (l labels) args(args []string, width int, more string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if i == 0 {
			out[i] = a
			continue
		}
		out[i] = l.phrase(a, width, more)
	}
	return out
}

// maxPhrase bounds a labelled argument or reply, in characters.
const maxPhrase = 48

// phrase labels an argument or a reply: its name when it has one, else
// word by word (word), at most maxPhrase characters.
func (l labels) phrase(s string, width int, more string) string {
	if n, ok := l.name(s); ok {
		return n
	}
	ws := strings.Split(s, " ")
	for i, w := range ws {
		ws[i] = l.word(w, width, more)
	}
	return cut(strings.Join(ws, " "), maxPhrase, more)
}

// word labels one word: a token or a stamp by its name, the lock key as
// "K" (inside another key too), an opaque value longer than width cut to
// width; other words (a script's name, "create(P/L1)=0") stay whole.
func (l labels) word(w string, width int, more string) string {
	if n, ok := l.name(w); ok {
		return n
	}
	if l.key != "" && w != l.key && strings.Contains(w, l.key) {
		w = strings.ReplaceAll(w, l.key, "K")
	} else if strings.HasPrefix(w, "lock:") {
		return "K"
	}
	if opaque(w) {
		return cut(w, width, more)
	}
	return w
}

// opaqueRun is what makes a word opaque: 8 hex digits or more in a row,
// the mark of a random token, a hash or a long number.
var opaqueRun = regexp.MustCompile(`[0-9a-fA-F]{8,}`)

func opaque(w string) bool { return opaqueRun.MatchString(w) }

// cut shortens s to n characters, the last one being more, when it is
// longer.
func cut(s string, n int, more string) string {
	r := []rune(s)
	if n < 2 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + more
}

// wrap breaks s into lines of at most width characters at its spaces, the
// lines after the first indented by indent; a word longer than a line gets
// a line of its own (and is cut where the line is).
func wrap(s string, width int, indent string) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = indent + w
		}
	}
	return append(lines, line)
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

// Abbreviations says, for the timelines of strategy's runs, what their
// short names stand for: the lock key, the tokens, and the names of the
// store the strategy locks on (etcd's prefix, leases and revisions; a
// PostgreSQL row's expiry). The report and locklab play show it beside a
// timeline.
func Abbreviations(strategy string) string {
	const common = "K: the lock's key (named above the timeline). c1's: the token or value of client c1; " +
		"a value cut with ~ is the first digits of a random token. The server's column shows who holds the lock " +
		"after the step (-: nobody)."
	if d, err := harness.LookupStore(harness.StoreOfStrategy(strategy)); err == nil && d.Abbreviations != nil {
		return d.Abbreviations(common)
	}
	return common
}
