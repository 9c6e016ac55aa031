// The matrix's progress: on a terminal one line rewritten in place (cells
// done of the total, schedules a second, the cells running, the time left
// at the pace so far); elsewhere a line for each cell that ran.

package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locklab/locklab/harness"
)

// matrixProgress follows a matrix through harness.MatrixOptions' Planned,
// Started and Progress, which the matrix calls one at a time.
type matrixProgress struct {
	st        *status
	began     time.Time
	total     int
	done      int
	na        int // of done, the n/a cells, said before any cell runs
	schedules int
	running   []string // "strategy × scenario", in the order they began
}

func newMatrixProgress(st *status, began time.Time) *matrixProgress {
	return &matrixProgress{st: st, began: began}
}

// hook sets o's Planned, Started and Progress to follow the run.
func (p *matrixProgress) hook(o *harness.MatrixOptions) {
	o.Planned = func(n int) { p.total = n }
	o.Started = func(strategy, scenario string) {
		p.running = append(p.running, strategy+" × "+scenario)
		p.show()
	}
	o.Progress = p.finished
}

func (p *matrixProgress) finished(c harness.Cell) {
	p.done++
	if c.Outcome == harness.NA {
		p.na++
	}
	p.schedules += c.Schedules
	name := c.Strategy + " × " + c.Scenario
	if i := slices.Index(p.running, name); i >= 0 {
		p.running = slices.Delete(p.running, i, i+1)
	}
	if !p.st.tty {
		// A line for each cell that ran; the n/a ones, said at once
		// before any runs, are counted only.
		if c.Outcome != harness.NA {
			p.st.line("%v %d/%d %s: %s, %d %s in %v", p.elapsed(), p.done, p.total, name, c.Outcome,
				c.Schedules, plural(c.Schedules, "schedule", "schedules"), c.Elapsed.Round(10*time.Millisecond))
		}
		return
	}
	p.show()
}

func (p *matrixProgress) elapsed() time.Duration { return time.Since(p.began).Round(time.Second) }

// show rewrites the terminal's line.
func (p *matrixProgress) show() {
	if !p.st.tty {
		return
	}
	el := time.Since(p.began)
	line := fmt.Sprintf("%v %d/%d cells, %.0f schedules/s", el.Round(time.Second), p.done, p.total, float64(p.schedules)/max(el.Seconds(), 1e-3))
	if len(p.running) > 0 {
		shown := p.running[:min(len(p.running), 2)]
		line += "; running " + strings.Join(shown, ", ")
		if more := len(p.running) - len(shown); more > 0 {
			line += fmt.Sprintf(" (+%d)", more)
		}
	}
	if ran := p.done - p.na; ran > 0 && p.done < p.total {
		left := time.Duration(float64(el) * float64(p.total-p.done) / float64(ran))
		line += fmt.Sprintf("; about %v left at this pace", left.Round(time.Second))
	}
	p.st.set("%s", line)
}
