// Package namespace keeps a run's keys apart from everything else on a
// Redis server the run does not own (the addrs backend: a server the user
// runs, which may hold data of its own). A Namespace is a fresh random hash
// tag; the run puts it into its lock key, every key a strategy derives from
// the lock key carries it too, and cleaning up deletes the keys that carry
// it, and nothing else.
//
// A namespaced key reads "{locklab:3f9a0c1d2e4b5a60}:lock:stale-recovery":
// the tag in braces is also a Redis Cluster hash tag, so a lock key and the
// keys derived from it stay in one hash slot.
package namespace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/ttlclock"
)

// Namespace is a random tag that names a run's keys on a shared server.
// The zero Namespace is no namespace: Key returns its key unchanged and
// Owns nothing.
type Namespace struct {
	tag string // "{locklab:<16 hex digits>}"
}

// New returns a fresh Namespace: 64 random bits, so that two runs (or two
// workers of one exploration) on one server never share a key.
func New() Namespace {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("namespace: crypto/rand failed: " + err.Error()) // never, on Go 1.24+
	}
	return Namespace{tag: "{locklab:" + hex.EncodeToString(b[:]) + "}"}
}

// IsZero reports whether n is no namespace.
func (n Namespace) IsZero() bool { return n.tag == "" }

// String returns the tag, "{locklab:<id>}", or "" for no namespace.
func (n Namespace) String() string { return n.tag }

// Key returns key inside the namespace: the tag, a colon and key.
func (n Namespace) Key(key string) string {
	if n.tag == "" {
		return key
	}
	return n.tag + ":" + key
}

// Owns reports whether s (a key name) carries the namespace's tag.
func (n Namespace) Owns(s string) bool { return n.tag != "" && strings.Contains(s, n.tag) }

// Pattern is the SCAN MATCH pattern of the namespace's keys.
func (n Namespace) Pattern() string {
	// '{', '}' and ':' are literal in Redis glob patterns; the hex digits
	// and the letters of "locklab" are too.
	return "*" + n.tag + "*"
}

// Tracker collects the names of the namespace's keys that commands touch:
// any argument that carries the tag names a key of the namespace (or a
// channel, which deleting leaves alone). Cleaning up by the tracked names
// costs a command per server, where a SCAN walks the whole database.
type Tracker struct {
	ns   Namespace
	keys map[string]bool
	list []string
}

// NewTracker returns a Tracker of n's keys.
func NewTracker(n Namespace) *Tracker { return &Tracker{ns: n, keys: map[string]bool{}} }

// Note records the arguments of a command that carry the namespace's tag.
// The caller serializes calls.
func (t *Tracker) Note(args []any) {
	for _, a := range args {
		var s string
		switch v := a.(type) {
		case string:
			s = v
		case []byte:
			s = string(v)
		default:
			continue
		}
		if t.ns.Owns(s) && !t.keys[s] {
			t.keys[s] = true
			t.list = append(t.list, s)
		}
	}
}

// Keys returns the tracked names, in the order they were first seen. The
// caller must not change the slice.
func (t *Tracker) Keys() []string { return t.list }

// Delete deletes keys (each must carry the namespace's tag; others are
// skipped) in one command.
func Delete(ctx context.Context, c redis.Conn, n Namespace, keys []string) error {
	args := make([]any, 0, len(keys))
	for _, k := range keys {
		if n.Owns(k) {
			args = append(args, k)
		}
	}
	if len(args) == 0 {
		return nil
	}
	_, err := redis.DoContext(c, ctx, "DEL", args...)
	return err
}

// Advance shortens the TTLs of keys (those carrying the namespace's tag)
// by d and deletes those whose TTL runs out, as ttlclock.Advance does for a
// whole database; keys without a TTL are left alone. It returns how many
// expired.
func Advance(ctx context.Context, c redis.Conn, n Namespace, keys []string, d time.Duration) (int, error) {
	own := make([]string, 0, len(keys))
	for _, k := range keys {
		if n.Owns(k) {
			own = append(own, k)
		}
	}
	return ttlclock.AdvanceKeys(ctx, c, own, d)
}

// Sweep deletes every key of c's database that carries the namespace's
// tag, found with SCAN MATCH: the cleanup that catches keys no tracker saw
// (a run cut short, a worker process). It returns how many it deleted.
func Sweep(ctx context.Context, c redis.Conn, n Namespace) (int, error) {
	if n.IsZero() {
		return 0, nil
	}
	deleted := 0
	cursor := "0"
	for {
		v, err := redis.Values(redis.DoContext(c, ctx, "SCAN", cursor, "MATCH", n.Pattern(), "COUNT", 1000))
		if err != nil {
			return deleted, err
		}
		var keys []string
		if _, err := redis.Scan(v, &cursor, &keys); err != nil {
			return deleted, err
		}
		if len(keys) > 0 {
			if err := Delete(ctx, c, n, keys); err != nil {
				return deleted, err
			}
			deleted += len(keys)
		}
		if cursor == "0" {
			return deleted, nil
		}
	}
}

// SweepAll runs Sweep on every server of srcs, whatever became of the
// caller's context (it has 10 seconds of its own): the last cleanup of a
// command, which runs after a Ctrl-C too.
func SweepAll(n Namespace, srcs []locklab.ConnSource) error {
	if n.IsZero() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for i, src := range srcs {
		c, err := src.GetContext(ctx)
		if err == nil {
			_, err = Sweep(ctx, c, n)
			c.Close()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: deleting the keys of %s: %w", i+1, n, err))
		}
	}
	return errors.Join(errs...)
}
