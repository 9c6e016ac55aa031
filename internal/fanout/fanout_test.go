package fanout

import (
	"context"
	"testing"
)

func TestOf(t *testing.T) {
	if n := Of(context.Background()); n != 0 {
		t.Fatalf("a bare context: %d, want 0", n)
	}
	ctx, cancel := context.WithCancel(With(context.Background(), 3))
	defer cancel()
	if n := Of(ctx); n != 3 {
		t.Fatalf("a round to 3 nodes, seen through a derived context: %d, want 3", n)
	}
}
