package harness

import "testing"

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
