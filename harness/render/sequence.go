// The sequence diagram of a history as inline SVG, for the HTML report.

package render

import (
	"fmt"
	"html"
	"html/template"
	"strings"

	"github.com/locklab/locklab/harness"
)

// Layout of the sequence diagram, in SVG user units (pixels).
const (
	seqLeft    = 112 // room for the step column
	seqCol     = 170 // distance between lifelines
	seqHead    = 46  // participant boxes
	seqLabel   = 26  // max characters of an arrow label
	seqNoteH   = 18  // a line of notes
	seqCmdH    = 24  // command arrow
	seqReplyH  = 22  // reply arrow
	seqBandH   = 24  // an environment event or a violation
	seqPadding = 10
)

// sequenceSVG draws a history as a sequence diagram: a lifeline per client
// and per node, an arrow per command and its reply, the client's
// conclusions under its arrow, the key's value on each node after the
// step, environment events as bands across, and the violation in red.
func sequenceSVG(h *harness.History, id string) template.HTML {
	d := &seqDiagram{h: h, l: labelsOf(h), marker: id + "-arrow", nc: len(h.Clients), nn: len(h.Nodes)}
	d.width = seqLeft + (d.nc+d.nn)*seqCol + seqPadding
	d.y = seqHead + 16
	for _, e := range h.Events {
		d.row(e)
	}
	height := d.y + seqHead

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="seq" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		d.width, height, d.width, height, esc(fmt.Sprintf("sequence diagram of %s on %s", h.Scenario, h.Strategy)))
	fmt.Fprintf(&b, `<defs><marker id="%s" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="seq-arrowhead"/></marker></defs>`, d.marker)
	d.participants(&b, height)
	b.WriteString(`<text class="seq-step-head" x="8" y="26">step</text>`)
	b.WriteString(d.body.String())
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// seqDiagram is a sequence diagram being drawn: its rows go to body, y
// the top of the next one.
type seqDiagram struct {
	h      *harness.History
	l      labels
	marker string // the arrowheads' id
	nc, nn int    // clients and nodes
	width  int
	body   strings.Builder
	y      int
}

// x is the middle of column col, the clients' then the nodes'; clientX
// is client c's, nodeX node n's.
func (d *seqDiagram) x(col int) int     { return seqLeft + seqCol/2 + col*seqCol }
func (d *seqDiagram) clientX(c int) int { return d.x(c - 1) }
func (d *seqDiagram) nodeX(n int) int   { return d.x(d.nc + n - 1) }

// row draws event e: its step (a band, a command and its reply, or a
// client's local action), the client's notes, the keys' values, the
// violation, and the step's number and label, with a rule under it.
func (d *seqDiagram) row(e harness.Event) {
	top := d.y
	bad := e.Violation != "" || len(e.Holders) > 1
	switch {
	case e.Client == 0:
		text := e.Label
		if len(e.Notes) > 0 {
			text += ": " + strings.Join(e.Notes, "; ")
		}
		fmt.Fprintf(&d.body, `<rect class="seq-env" x="%d" y="%d" width="%d" height="%d" rx="4"/>`,
			seqLeft+8, d.y+2, d.width-seqLeft-8-seqPadding, seqBandH-4)
		fmt.Fprintf(&d.body, `<text class="seq-env-text" x="%d" y="%d" text-anchor="middle">%s</text>`,
			(seqLeft+d.width)/2, d.y+seqBandH/2+5, esc(text))
		d.y += seqBandH + 4
	case e.Node > 0 && e.Node <= d.nn && e.Client <= d.nc:
		d.command(e)
	default:
		// A local action of a client: write, sleep.
		cx := d.clientX(min(max(e.Client, 1), max(d.nc, 1)))
		text := strings.Join(e.Command, " ")
		w := min(seqCol-16, 12+7*len([]rune(text)))
		fmt.Fprintf(&d.body, `<rect class="seq-local" x="%d" y="%d" width="%d" height="20" rx="3"/>`, cx-w/2, d.y+6, w)
		fmt.Fprintf(&d.body, `<text class="seq-local-text" x="%d" y="%d" text-anchor="middle">%s</text>`, cx, d.y+20, esc(clip(text, seqLabel-4)))
		d.y += 30
	}
	if e.Client > 0 && len(e.Notes) > 0 && e.Client <= d.nc {
		d.notes(e)
	}
	// The key's value on each node after the step.
	if len(e.Keys) == d.nn {
		d.keys(e)
	}
	if bad {
		fmt.Fprintf(&d.body, `<rect class="seq-violation" x="%d" y="%d" width="%d" height="%d" rx="4"/>`,
			seqLeft+8, d.y+2, d.width-seqLeft-8-seqPadding, seqBandH-2)
		fmt.Fprintf(&d.body, `<text class="seq-violation-text" x="%d" y="%d" text-anchor="middle">!! %s</text>`,
			(seqLeft+d.width)/2, d.y+seqBandH/2+5, esc(violationLine(d.h, e)))
		d.y += seqBandH + 2
	}
	// The step number and label, with a rule under the row.
	cls := "seq-step"
	if bad {
		cls += " seq-step-bad"
	}
	fmt.Fprintf(&d.body, `<text class="%s" x="8" y="%d">%d</text><text class="seq-step-label" x="34" y="%d">%s</text>`,
		cls, top+17, e.Step, top+17, esc(clip(e.Label, 11)))
	d.y += 6
	fmt.Fprintf(&d.body, `<line class="seq-row" x1="4" y1="%d" x2="%d" y2="%d"/>`, d.y, d.width-4, d.y)
}

// command draws a client's command to a node as an arrow, and the reply
// as one back.
func (d *seqDiagram) command(e harness.Event) {
	cx, nx := d.clientX(e.Client), d.nodeX(e.Node)
	cmd := strings.Join(d.l.args(e.Command, 12, "…"), " ")
	if len(e.Extra) > 0 {
		cmd += " (+" + e.Extra[0] + ")"
	}
	d.y += seqCmdH
	arrow(&d.body, d.marker, "seq-cmd", cx, nx, d.y, cmd, strings.Join(e.Command, " "))
	reply := d.l.phrase(e.Reply, 16, "…")
	if reply == "" {
		reply = "(no reply)"
	}
	d.y += seqReplyH
	arrow(&d.body, d.marker, "seq-reply", nx, cx, d.y, reply, e.Reply)
	d.y += 4
}

// notes draws the client's conclusions under its lifeline, an
// acquisition in green and a loss in red.
func (d *seqDiagram) notes(e harness.Event) {
	cx := d.clientX(e.Client)
	for _, n := range e.Notes {
		n = strings.TrimPrefix(n, fmt.Sprintf("c%d ", e.Client))
		cls := "seq-note"
		switch {
		case strings.HasPrefix(n, "acquired"):
			cls += " seq-note-good"
		case strings.Contains(n, "deleted") || strings.Contains(n, "not held") || strings.Contains(n, "crash"):
			cls += " seq-note-bad"
		}
		fmt.Fprintf(&d.body, `<text class="%s" x="%d" y="%d">%s</text>`, cls, cx+6, d.y+13, esc(clip(n, seqLabel+4)))
		d.y += seqNoteH
	}
}

// keys draws the key's value on each node, a pill under its lifeline.
func (d *seqDiagram) keys(e harness.Event) {
	ky := d.y + 12
	for i, k := range e.Keys {
		v := d.l.value(k, 16, "…")
		cls := "seq-key"
		if k == "-" {
			cls += " seq-key-none"
		}
		kx := d.nodeX(i + 1)
		w := 14 + 7*len([]rune(v))
		fmt.Fprintf(&d.body, `<rect class="%s" x="%d" y="%d" width="%d" height="16" rx="8"/>`, cls, kx-w/2, ky-12, w)
		fmt.Fprintf(&d.body, `<text class="seq-key-text" x="%d" y="%d" text-anchor="middle">%s</text>`, kx, ky, esc(v))
	}
	d.y += 20
}

// participants draws the lifelines, and each participant's box at the
// top and the bottom of a diagram height high.
func (d *seqDiagram) participants(b *strings.Builder, height int) {
	names := make([]string, 0, d.nc+d.nn)
	kinds := make([]string, 0, d.nc+d.nn)
	for _, c := range d.h.Clients {
		n := fmt.Sprintf("c%d", c.ID)
		if c.Probe {
			n += " (probe)"
		}
		names = append(names, n)
		kinds = append(kinds, "client")
	}
	for _, n := range d.h.Nodes {
		names = append(names, n)
		kinds = append(kinds, "node")
	}
	for i, n := range names {
		cx := d.x(i)
		fmt.Fprintf(b, `<line class="seq-life" x1="%d" y1="%d" x2="%d" y2="%d"/>`, cx, seqHead-10, cx, height-seqHead+10)
		for _, by := range []int{6, height - seqHead + 6} {
			fmt.Fprintf(b, `<rect class="seq-part seq-part-%s" x="%d" y="%d" width="%d" height="28" rx="5"/>`, kinds[i], cx-seqCol/2+14, by, seqCol-28)
			fmt.Fprintf(b, `<text class="seq-part-text" x="%d" y="%d" text-anchor="middle">%s</text>`, cx, by+19, esc(clip(n, 20)))
		}
	}
}

// arrow draws a labelled arrow at height y from x1 to x2, the label above
// it; full is the unabridged text, shown as a tooltip.
func arrow(b *strings.Builder, marker, cls string, x1, x2, y int, label, full string) {
	if x1 == x2 {
		x2 += 40
	}
	mid := (x1 + x2) / 2
	fmt.Fprintf(b, `<g class="%s"><title>%s</title>`, cls, esc(full))
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" marker-end="url(#%s)"/>`, x1, y, x2, y, marker)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text></g>`, mid, y-5, esc(clip(label, seqLabel+(abs(x2-x1)/seqCol-1)*20)))
}

func clip(s string, n int) string { return cut(s, n, "…") }

func esc(s string) string { return html.EscapeString(s) }

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
