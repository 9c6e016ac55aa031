package harness

import (
	"testing"
)

// TestTouchConflicts: steps commute only when neither writes what the
// other touches, and an undeclared step conflicts with every other.
func TestTouchConflicts(t *testing.T) {
	read := &Touch{Reads: []string{"a"}}
	write := &Touch{Writes: []string{"a"}}
	other := &Touch{Writes: []string{"b"}, Reads: []string{"c"}}
	for _, tc := range []struct {
		name string
		t, u *Touch
		want bool
	}{
		{"two reads", read, read, false},
		{"a write and a read of it", write, read, true},
		{"a read and a write of it", read, write, true},
		{"two writes", write, write, true},
		{"disjoint", write, other, false},
		{"undeclared", nil, read, true},
		{"undeclared other", other, nil, true},
		{"nothing declared", &Touch{}, &Touch{}, false},
	} {
		if got := tc.t.Conflicts(tc.u); got != tc.want {
			t.Errorf("%s: Conflicts = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestIndependent: steps of two clients that touch nothing in common
// commute; steps of one client, an event, or an undeclared step do not.
func TestIndependent(t *testing.T) {
	a := stepEffect{client: 1, touch: &Touch{Writes: []string{"key:a"}}}
	b := stepEffect{client: 2, touch: &Touch{Writes: []string{"key:b"}}}
	if !independent(a, b) {
		t.Error("writes of two keys by two clients conflict")
	}
	for name, x := range map[string]stepEffect{
		"same client": {client: 1, touch: &Touch{}},
		"event":       {client: 0},
		"undeclared":  {client: 2},
		"same key":    {client: 2, touch: &Touch{Reads: []string{"key:a"}}},
		"both hold":   {client: 3, touch: &Touch{Writes: []string{touchHolders}}},
	} {
		y := a
		if name == "both hold" {
			y.touch = &Touch{Writes: []string{"key:a", touchHolders}}
		}
		if independent(y, x) {
			t.Errorf("%s: independent", name)
		}
	}
}
