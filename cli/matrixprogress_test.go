package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/locklab/locklab/harness"
)

// TestMatrixProgress: on a terminal the line says the cells done of the
// total, the schedules a second, the cells running and the time left; on
// a pipe each cell that ran is a line of its own, and n/a cells none.
func TestMatrixProgress(t *testing.T) {
	feed := func(o *harness.MatrixOptions) {
		o.Planned(4)
		o.Progress(harness.Cell{Strategy: "a", Scenario: "x", Outcome: harness.NA})
		o.Started("b", "x")
		o.Started("b", "y")
		o.Started("c", "y")
		o.Progress(harness.Cell{Strategy: "b", Scenario: "x", Outcome: harness.Violated, Schedules: 1, Elapsed: 20 * time.Millisecond})
	}
	var tty bytes.Buffer
	var o harness.MatrixOptions
	newMatrixProgress(&status{w: &tty, tty: true}, time.Now().Add(-10*time.Second)).hook(&o)
	feed(&o)
	lines := strings.Split(tty.String(), "\r\033[K")
	last := lines[len(lines)-1]
	assert.Regexp(t, `^10s 2/4 cells, 0 schedules/s; running b × y, c × y; about 20s left at this pace$`, last)
	assert.Contains(t, tty.String(), "running b × x, b × y (+1)", "two running cells named, the others counted")

	var pipe bytes.Buffer
	o = harness.MatrixOptions{}
	newMatrixProgress(&status{w: &pipe}, time.Now().Add(-3*time.Second)).hook(&o)
	feed(&o)
	assert.Equal(t, "3s 2/4 b × x: VIOLATED, 1 schedule in 20ms\n", pipe.String())
}
