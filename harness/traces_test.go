package harness

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTraceKeyFollowsIndependence: schedules that differ by swapping
// adjacent independent steps are one trace; a swap of dependent steps, of
// a client's own steps, or across an event is another.
func TestTraceKeyFollowsIndependence(t *testing.T) {
	c := func(id int) Step { return Step{Kind: StepClient, Client: id} }
	eff := func(id int, reads, writes []string) stepEffect {
		return stepEffect{client: id, touch: &Touch{Reads: reads, Writes: writes}}
	}
	key := func(steps Schedule, effs ...stepEffect) uint64 { return traceKey(steps, effs, len(steps)) }
	a, b := eff(1, nil, []string{"key:a"}), eff(2, nil, []string{"key:b"})
	readA := eff(2, []string{"key:a"}, nil)
	time := Step{Kind: StepTime}

	assert.Equal(t, key(Schedule{c(1), c(2)}, a, b), key(Schedule{c(2), c(1)}, b, a),
		"writes to two keys commute")
	assert.NotEqual(t, key(Schedule{c(1), c(2)}, a, readA), key(Schedule{c(2), c(1)}, readA, a),
		"a write and a read of one key do not")
	assert.Equal(t, key(Schedule{c(1), c(1), c(2)}, a, a, b), key(Schedule{c(1), c(2), c(1)}, a, b, a),
		"a client's second write moves past another client's independent step")
	assert.NotEqual(t, key(Schedule{c(1), c(1), c(2)}, a, a, readA), key(Schedule{c(1), c(2), c(1)}, a, readA, a),
		"but not past a read of what it writes")
	assert.NotEqual(t, key(Schedule{c(1), time, c(2)}, a, stepEffect{}, b), key(Schedule{c(2), time, c(1)}, b, stepEffect{}, a),
		"an event conflicts with every step")
	assert.NotEqual(t, key(Schedule{c(1), c(2)}, a, b), key(Schedule{c(2), c(1)}, b),
		"a step with no effect recorded conflicts with every step")
	assert.Equal(t, key(Schedule{c(1), c(2)}, a, b), traceKey(Schedule{c(1), c(2), c(2)}, []stepEffect{a, b, b}, 2),
		"the key names the first n steps")
}
