package redisnode

import "testing"

// Each run starts with master and replica alike and the link cut; a
// failover loses what the master took since, and the next Prepare brings
// the pair back.
func TestReplicatedFailoverLosesWrites(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, be string) {
		ctx := ctxT(t)
		c := start(t, Options{Backend: be, N: 1})
		r, err := c.Replicated(ctx, c.Nodes()[0])
		if err != nil {
			t.Fatal(err)
		}
		if r.Name() != "n1" {
			t.Errorf("name %q, want n1", r.Name())
		}
		for round := 0; round < 3; round++ {
			if err := r.Prepare(ctx); err != nil {
				t.Fatalf("round %d: prepare: %v", round, err)
			}
			master := r.current()
			if _, err := master.Do(ctx, "SET", "lock", "c1"); err != nil {
				t.Fatal(err)
			}
			if err := r.Failover(ctx); err != nil {
				t.Fatalf("round %d: failover: %v", round, err)
			}
			promoted := r.current()
			if master.Addr() == r.Addr() {
				t.Errorf("round %d: clients follow the promoted replica", round)
			}
			if _, ok := get(t, promoted, "lock"); ok {
				t.Errorf("round %d: the promoted replica must lack the write made after the cut", round)
			}
			if role, err := promoted.Role(ctx); err != nil || role != "master" {
				t.Fatalf("round %d: promoted role %q (%v), want master", round, role, err)
			}
			if role, err := master.Role(ctx); err != nil || role != "slave" {
				t.Fatalf("round %d: the old master is demoted: role %q (%v), want slave", round, role, err)
			}
			if _, err := master.Do(ctx, "SET", "late", "write"); err == nil {
				t.Fatalf("round %d: the demoted master refuses writes", round)
			}
		}
		if err := r.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// The replica misses writes until CatchUp, which lets a WAIT on the master
// count it; after Lag it misses them again.
func TestReplicatedCatchUpForWait(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, be string) {
		ctx := ctxT(t)
		c := start(t, Options{Backend: be, N: 1})
		r, err := c.Replicated(ctx, c.Nodes()[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		master := r.current()
		// WAIT counts the replicas that have its own connection's writes:
		// the write and the WAIT share one connection, as a strategy's do.
		conn, err := master.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Do("SET", "acked", "1"); err != nil {
			t.Fatal(err)
		}
		if err := r.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Do("WAIT", 1, 5000)
		if err != nil || n != int64(1) {
			t.Fatalf("WAIT after CatchUp: %v %v, want 1", n, err)
		}
		if err := r.Lag(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := master.Do(ctx, "SET", "missed", "1"); err != nil {
			t.Fatal(err)
		}
		if err := r.Failover(ctx); err != nil {
			t.Fatal(err)
		}
		promoted := r.current()
		if _, ok := get(t, promoted, "acked"); !ok {
			t.Error("the write a WAIT saw acknowledged survives the failover")
		}
		if _, ok := get(t, promoted, "missed"); ok {
			t.Error("the write after Lag is lost in the failover")
		}
	})
}
