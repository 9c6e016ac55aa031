package play

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkRoom is a workshop room on one "locklab play": 30 sessions on
// loopback, each on redis-server processes of its own, every participant
// clicking through the C1/C2 level and resetting, over and over, until b.N
// clicks in all. It reports the click latency seen by the browser (HTTP
// round trip included): p50, p99 and the worst, in milliseconds, for steps
// and for resets (a replay on fresh state); then it closes the server and
// fails if any session's Redis server is left.
//
//	go test -run '^$' -bench Room -benchtime 3000x ./harness/play/
//
// "paced" has each participant wait 50-250ms between clicks (a fast
// human); "flat-out" clicks again as soon as the answer is in: 30 requests
// always in flight.
func BenchmarkRoom(b *testing.B) {
	for _, bc := range []struct {
		name       string
		minThink   time.Duration
		jitterMore time.Duration
	}{
		{"paced", 50 * time.Millisecond, 200 * time.Millisecond},
		{"flat-out", 0, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			room(b, 30, bc.minThink, bc.jitterMore)
		})
	}
}

func room(b *testing.B, sessions int, think, jitter time.Duration) {
	ts := newTestServer(b, Options{MaxSessions: sessions})
	ids := make([]string, sessions)
	var wg sync.WaitGroup
	errs := make([]error, sessions)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r response
			if code := ts.post("/api/sessions", map[string]any{"level": "c1c2"}, &r); code != http.StatusOK {
				errs[i] = fmt.Errorf("session %d: status %d", i, code)
			}
			ids[i] = r.Session
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	per := (b.N + sessions - 1) / sessions
	var mu sync.Mutex
	var steps, resets []time.Duration
	b.ResetTimer()
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			var mySteps, myResets []time.Duration
			seq := 0
			for n := 0; n < per; n++ {
				if think > 0 {
					time.Sleep(think + time.Duration(rng.Int64N(int64(jitter)+1)))
				}
				var r response
				t0 := time.Now()
				if seq == len(c1c2) {
					code := ts.post("/api/reset", map[string]any{"session": id}, &r)
					myResets = append(myResets, time.Since(t0))
					if code != http.StatusOK || r.Seq != 0 {
						errs[i] = fmt.Errorf("reset: status %d, seq %d", code, r.Seq)
						return
					}
					seq = 0
					continue
				}
				code := ts.post("/api/step", stepReq(id, seq, c1c2[seq]), &r)
				mySteps = append(mySteps, time.Since(t0))
				if code != http.StatusOK || r.Seq != seq+1 {
					errs[i] = fmt.Errorf("step %d: status %d, seq %d", seq+1, code, r.Seq)
					return
				}
				if seq == 9 && !r.Solved {
					errs[i] = fmt.Errorf("session %d: the C1/C2 schedule did not break setnx-del", i)
					return
				}
				seq++
			}
			mu.Lock()
			steps = append(steps, mySteps...)
			resets = append(resets, myResets...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	report := func(name string, ds []time.Duration) {
		if len(ds) == 0 {
			return
		}
		slices.Sort(ds)
		q := func(p float64) float64 {
			return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))]) / 1e6
		}
		b.ReportMetric(q(0.50), name+"-p50-ms")
		b.ReportMetric(q(0.99), name+"-p99-ms")
		b.ReportMetric(float64(ds[len(ds)-1])/1e6, name+"-max-ms")
	}
	report("step", steps)
	report("reset", resets)
	// The machine's load average when the run ended: on a shared machine
	// the latency tail follows it.
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(raw)); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				b.ReportMetric(v, "loadavg")
			}
		}
	}
	ts.srv.Close()
	if n := ts.srv.Sessions(); n != 0 {
		b.Fatalf("%d sessions left after Close", n)
	}
	ts.c.assertGone(b)
}
