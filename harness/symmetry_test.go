package harness

import (
	"slices"
	"testing"
)

// TestTwins: clients are interchangeable when their programs are the
// same and neither a fault nor the property's waiter names them; each
// is paired with the lowest such client.
func TestTwins(t *testing.T) {
	alphabet := func(faults ...string) []Step {
		var out []Step
		for _, f := range faults {
			st, err := parseStep(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, st)
		}
		return out
	}
	same := "acquire write release"
	for _, tc := range []struct {
		name     string
		programs []string
		faults   []string
		waiter   int
		want     []int
	}{
		{"stale-recovery", []string{same, same, "acquire crash"}, []string{"time"}, 0, []int{0, 1, 1, 3}},
		{"programs differ", []string{"acquire sleep(32s) write release", same}, nil, 0, []int{0, 1, 2}},
		{"a fault names c1", []string{same, same, same}, []string{"isolate(c1)", "time"}, 0, []int{0, 1, 2, 2}},
		{"a skew names c2", []string{same, same}, []string{"skew(c2,+32s)"}, 0, []int{0, 1, 2}},
		{"the waiter", []string{same, same, same}, nil, 3, []int{0, 1, 1, 3}},
		{"node faults name no client", []string{same, same}, []string{"failover(n1)", "restart(n1)"}, 0, []int{0, 1, 1}},
	} {
		spec := runSpec{programs: progs(tc.programs...), waiter: tc.waiter}
		if got := twins(spec, alphabet(tc.faults...)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: twins %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMirrored: a step is left to its twin's only while neither client has
// moved, and only where the twin's step runs from the same choice at the
// same cost.
func TestMirrored(t *testing.T) {
	e := &explorer{twin: []int{0, 1, 1, 3}}
	step := func(s string) Step {
		st, err := parseStep(s)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	c1, c2, c3 := step("c1"), step("c2"), step("c3")
	free := func(Step) int { return 0 }
	awake := []Step{c1, c2, c3}
	for _, tc := range []struct {
		name   string
		alt    Step
		steps  Schedule
		taken  Step
		ok     bool
		awake  []Step
		cost   func(Step) int
		room   int
		mirror bool
	}{
		{"c2 beside the run's own c1", c2, Schedule{c3, step("time")}, c1, true, awake, free, 2, true},
		{"c2 beside c1 as an alternative", c2, Schedule{c3}, c3, true, awake, free, 2, true},
		{"c1 is the lowest", c1, nil, c3, true, awake, free, 2, false},
		{"c3 has no twin", c3, nil, c1, true, awake, free, 2, false},
		{"c1 has moved", c2, Schedule{c1}, c3, true, awake, free, 2, false},
		{"c2 has moved", c2, Schedule{c2, c3}, c3, true, awake, free, 2, false},
		{"c1 asleep", c2, nil, c3, true, []Step{c2, c3}, free, 2, false},
		{"c1 beyond the bound", c2, nil, c3, true, awake, func(Step) int { return 1 }, 0, false},
		{"c1 costs more", c2, nil, c3, true, awake, func(s Step) int { return b2i(s.Client == 1) }, 2, false},
	} {
		if got := e.mirrored(tc.alt, tc.steps, tc.taken, tc.ok, tc.awake, tc.cost, tc.room); got != tc.mirror {
			t.Errorf("%s: mirrored %v, want %v", tc.name, got, tc.mirror)
		}
	}
	if (&explorer{}).mirrored(c2, nil, c1, true, awake, free, 2) {
		t.Error("without twins, a step was left to a mirror")
	}
}
