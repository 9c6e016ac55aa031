package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab"
)

func TestQuorumArithmetic(t *testing.T) {
	srv, l := cluster(t, 5, locklab.Config{})
	ctx := context.Background()
	for k := 0; k <= 5; k++ {
		t.Run(fmt.Sprintf("%d foreign", k), func(t *testing.T) {
			key := fmt.Sprintf("q%d", k)
			// Spread the foreign keys: nodes 4, 2, 0, 3, 1.
			foreign := map[int]bool{}
			for _, i := range []int{4, 2, 0, 3, 1}[:k] {
				foreign[i] = true
				srv[i].Do(t, "SET", key, "foreign", "PX", 60000)
			}
			for _, s := range srv {
				s.Do(t, "CONFIG", "RESETSTAT")
			}
			lease, err := l.Acquire(ctx, key, 10*time.Second)
			if k <= 2 {
				if err != nil {
					t.Fatalf("acquire with %d of 5 nodes held elsewhere: %v", k, err)
				}
				for i, s := range srv {
					want := lease.Token
					if foreign[i] {
						want = "foreign"
					}
					if got := get(t, s, key); got != want {
						t.Fatalf("node %d holds %q, want %q", i, got, want)
					}
				}
				if err := l.Release(ctx, lease); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, locklab.ErrNotAcquired) || errors.Is(err, locklab.ErrUnavailable) {
				t.Fatalf("acquire with %d of 5 nodes held elsewhere: %v, want ErrNotAcquired only", k, err)
			}
			t.Log(err)
			for i, s := range srv {
				want := ""
				if foreign[i] {
					want = "foreign"
				}
				if got := get(t, s, key); got != want {
					t.Fatalf("after the failed attempt node %d holds %q, want %q", i, got, want)
				}
				// Refusing nodes got no release; granting nodes got one.
				releases := commandCalls(t, s, "evalsha") + commandCalls(t, s, "eval")
				if foreign[i] && releases != 0 {
					t.Fatalf("node %d refused but got %d release scripts", i, releases)
				}
				if !foreign[i] && releases == 0 {
					t.Fatalf("node %d granted and got no release", i)
				}
			}
		})
	}
}

func TestSplitVote(t *testing.T) {
	srv, l := cluster(t, 5, locklab.Config{})
	for i, v := range []string{"a", "a", "b", "b"} {
		srv[i].Do(t, "SET", "k", v, "PX", 60000)
	}
	_, err := l.Acquire(context.Background(), "k", 10*time.Second)
	if !errors.Is(err, locklab.ErrNotAcquired) || !strings.Contains(err.Error(), "refused by 4 of 5 nodes") {
		t.Fatalf("acquire against a split vote: %v, want ErrNotAcquired counting 4 refusals", err)
	}
	if got := get(t, srv[4], "k"); got != "" {
		t.Fatalf("node 4 kept %q after the failed attempt", got)
	}
}
