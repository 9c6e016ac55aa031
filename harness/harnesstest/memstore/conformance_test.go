package memstore

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/harnesstest/memstore/memlock"
	"github.com/locklab/locklab/strategies/strategytest"
)

// TestConformance: the family's strategies, mem-del's release broken on
// purpose among them, pass the conformance suite every strategy passes
// (which holds mem-del to no owner-checked release: it claims none), on a
// server of its own; a lock lapses when the server's clock
// passes its TTL (TICK), which the suite's Expire asks for, so that no
// test waits a TTL out.
func TestConformance(t *testing.T) {
	srv, err := StartServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	admin := NewConn(srv.Addr())
	t.Cleanup(func() { admin.Close() })
	do := func(t *testing.T, words ...string) string {
		t.Helper()
		ans, err := admin.Do(context.Background(), words...)
		if err != nil {
			t.Fatal(err)
		}
		return ans
	}
	for _, name := range []string{memlock.CAS, memlock.Del} {
		t.Run(name, func(t *testing.T) { strategytest.RunStore(t, name, conformanceStore(srv.Addr(), do)) })
	}
}

// conformanceStore is the suite's hooks on the server at addr, do sending
// a request outside the locks'.
func conformanceStore(addr string, do func(t *testing.T, words ...string) string) strategytest.Store {
	return strategytest.Store{
		NewConfig: func(t *testing.T) locklab.Config {
			c := NewConn(addr)
			t.Cleanup(func() { c.Close() })
			return locklab.Config{Store: c}
		},
		RoundTrip: func(cfg locklab.Config) error {
			_, err := cfg.Store.(*Conn).Do(context.Background(), "GET", "round-trip")
			return err
		},
		Expire: func(t *testing.T, _ locklab.Config, lease locklab.Lease) {
			if do(t, "TICK", lease.Key, strconv.FormatInt(time.Hour.Milliseconds(), 10)) != "1" {
				t.Fatalf("%s: no lock expired", lease.Key)
			}
		},
		Holds: func(t *testing.T, _ locklab.Config, key string) bool { return do(t, "GET", key) != "NIL" },
		Expiry: func(t *testing.T, _ locklab.Config, lease locklab.Lease) (time.Duration, bool) {
			w := strings.Fields(do(t, "GET", lease.Key))
			if len(w) != 3 {
				t.Fatalf("%s: GET answered %q", lease.Key, w)
			}
			ms, _ := strconv.ParseInt(w[2], 10, 64)
			return time.Duration(ms) * time.Millisecond, true
		},
		Unreachable: func(t *testing.T) locklab.Config {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			return locklab.Config{Store: NewConn(addr)}
		},
		NilClient: func(*testing.T) locklab.Config { return locklab.Config{Store: (*Conn)(nil)} },
	}
}
