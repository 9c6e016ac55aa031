package render_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/locklab/locklab/harness/render"
)

// Statements of a Mermaid sequence diagram, as its grammar reads them
// (mermaid's sequenceDiagram.jison): an actor id has no "-", "<", ">", ":",
// ",", ";" or line break, an alias and a text run to the end of the line
// and hold no ";" (a statement separator) and no "#" (an entity code).
var (
	mmdParticipant = regexp.MustCompile(`^    participant ([^-<>:,;#\s]+)(?: as [^;#]+)?$`)
	mmdMessage     = regexp.MustCompile(`^    ([^-<>:,;#\s]+)(?:->>|-->>)([^-<>:,;#\s]+): [^;#]*$`)
	mmdNote        = regexp.MustCompile(`^    Note (?:right of|left of|over) ([^-<>:,;#\s]+)(?:,([^-<>:,;#\s]+))?: [^;#]*$`)
)

// TestMermaidSyntax: every diagram is one Mermaid sequence diagram: its
// header, then statements the grammar reads, naming only the participants
// it declared, and nothing else.
func TestMermaidSyntax(t *testing.T) {
	for _, name := range recorded {
		src := render.Mermaid(loadHistory(t, name))
		lines := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
		if lines[0] != "sequenceDiagram" || !strings.HasSuffix(src, "\n") {
			t.Errorf("%s: want the header sequenceDiagram and a final newline:\n%s", name, src)
			continue
		}
		declared := map[string]bool{}
		for i, l := range lines[1:] {
			var ids []string
			if m := mmdParticipant.FindStringSubmatch(l); m != nil {
				declared[m[1]] = true
				continue
			} else if m := mmdMessage.FindStringSubmatch(l); m != nil {
				ids = m[1:]
			} else if m := mmdNote.FindStringSubmatch(l); m != nil {
				ids = m[1:]
			} else {
				t.Errorf("%s, line %d: not a sequence diagram statement: %q", name, i+2, l)
				continue
			}
			for _, id := range ids {
				if id != "" && !declared[id] {
					t.Errorf("%s, line %d: %s is not a declared participant: %q", name, i+2, id, l)
				}
			}
		}
	}
}
