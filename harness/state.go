// State fingerprints: what decides the future of a run at a choice point,
// hashed, so that the explorer can skip a subtree it has already explored
// from the same state (explore.go).
//
// A run's future is a function of: every client's own past (the replies
// and clock readings it received, in order: its goroutine is deterministic
// code fed by them and by its seeded random source), what it has pending,
// its flags (crashed, paused, isolated, holding, skew); the data of every
// node, keys, values and TTLs; a replica's data where a failover can
// promote it; the virtual clock, the step count (the step bound, and the
// ticks clients read), the client that ran last (the default order and the
// preemption count); and the checkers' state (the acquisition counter, the
// fences the resource accepted, the newest writer). The fingerprint hashes
// all of it.
//
// TTLs are read from the servers, whose clocks run for real: a key's PTTL
// is its virtual TTL less the few milliseconds the run has taken so far.
// Every TTL the catalog sets or moves is a whole number of seconds (the
// scenario TTL, "time" events and sleeps), so the fingerprint holds the TTL
// rounded up to the second; a PTTL farther than half a second below a whole
// second makes the state not cacheable (its fingerprint is then the path
// that reached it, which no other path shares).

package harness

import (
	"encoding/binary"
	"fmt"
	"hash"
	"hash/fnv"
	"slices"
	"sort"
	"time"

	"github.com/gomodule/redigo/redis"
)

// contentScript returns every key of the database, sorted, each followed by
// its DUMP and its PTTL.
var contentScript = redis.NewScript(0, `
local keys = redis.call('KEYS', '*')
table.sort(keys)
local out = {}
for _, k in ipairs(keys) do
  out[#out+1] = k
  out[#out+1] = redis.call('DUMP', k)
  out[#out+1] = redis.call('PTTL', k)
end
return out`)

// wholeSeconds reports whether d is a whole number of seconds: the
// condition for reading TTLs to the second.
func wholeSeconds(d time.Duration) bool { return d%time.Second == 0 }

// nodeContent is one node's data as the fingerprint sees it; ok=false when
// a TTL could not be rounded safely.
type nodeContent struct {
	sum uint64
	ok  bool
}

// readContent reads node i's (0-based) data.
func (r *run) readContent(i int) (nodeContent, error) {
	c, err := r.slot.pool(i).GetContext(r.ctx)
	if err != nil {
		return nodeContent{}, err
	}
	defer c.Close()
	vs, err := redis.Values(contentScript.DoContext(r.ctx, c))
	if err != nil {
		return nodeContent{}, err
	}
	h := fnv.New64a()
	ok := true
	for j := 0; j+2 < len(vs); j += 3 {
		k, _ := redis.Bytes(vs[j], nil)
		d, _ := redis.Bytes(vs[j+1], nil)
		ttl, _ := redis.Int64(vs[j+2], nil)
		if ttl >= 0 {
			ms := ttl % 1000
			if ms != 0 && ms <= 500 {
				ok = false
			}
			ttl = (ttl + 999) / 1000
		}
		writeBytes(h, k)
		writeBytes(h, d)
		writeInt(h, ttl)
	}
	return nodeContent{sum: h.Sum64(), ok: ok}, nil
}

// readContents reads every node that is up; a node that is down keeps the
// data it had when last read (it makes the state not cacheable: its data
// may change while it is down).
func (r *run) readContents() ([]nodeContent, error) {
	r.mu.Lock()
	down := slices.Clone(r.down)
	r.mu.Unlock()
	out := make([]nodeContent, len(r.slot.nodes))
	for i := range r.slot.nodes {
		if down[i] {
			continue
		}
		nc, err := r.readContent(i)
		if err != nil {
			return nil, fmt.Errorf("reading %s's data: %w", r.slot.nodes[i].Name(), err)
		}
		out[i] = nc
	}
	return out, nil
}

func writeInt(h hash.Hash64, v int64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	h.Write(b[:])
}

func writeBytes(h hash.Hash64, b []byte) {
	writeInt(h, int64(len(b)))
	h.Write(b)
}

func writeString(h hash.Hash64, s string) { writeBytes(h, []byte(s)) }

func writeBool(h hash.Hash64, b bool) {
	if b {
		writeInt(h, 1)
	} else {
		writeInt(h, 0)
	}
}

// observe adds what client c just saw to its past (r.mu held).
func (c *client) observe(parts ...any) {
	h := fnv.New64a()
	writeInt(h, int64(c.trace))
	for _, p := range parts {
		writeString(h, fmt.Sprintf("%T:%v", p, p))
	}
	c.trace = h.Sum64()
}

// fingerprintLocked hashes the state of r at a choice point, with the
// nodes' data in contents (r.mu held). ok=false: the state cannot be
// compared with others (a TTL read too far from a whole second, or a node
// down).
func (r *run) fingerprintLocked(contents []nodeContent) (uint64, bool) {
	ok := true
	h := fnv.New64a()
	for i, nc := range contents {
		if r.down[i] || !nc.ok {
			ok = false
		}
		writeInt(h, int64(nc.sum))
		if r.spec.prepare {
			writeInt(h, int64(r.replica[i]))
		}
	}
	writeInt(h, int64(len(r.hist.Events)))
	writeInt(h, int64(r.now))
	writeInt(h, int64(r.last))
	writeInt(h, int64(r.acqs))
	writeInt(h, r.maxFence)
	writeInt(h, int64(r.lastWriter))
	writeInt(h, int64(len(r.hist.WrongRelease)))
	var lastFence int64
	for _, w := range r.hist.Writes {
		if w.Accepted {
			lastFence = w.Fence
		}
	}
	writeInt(h, lastFence)
	for _, c := range r.cls {
		writeInt(h, int64(c.trace))
		writeInt(h, int64(c.skew))
		for _, b := range []bool{c.done, c.crashed, c.paused, c.isolated, c.holding, c.inRelease, c.merge >= 0, c.probe} {
			writeBool(h, b)
		}
		writeString(h, c.lease.Token)
		writeInt(h, c.lease.Fence)
		writeInt(h, c.lease.Until.UnixNano())
		writeInt(h, int64(c.seq))
		writeInt(h, int64(c.info.Attempts))
		writeInt(h, int64(c.info.Acquired))
		ps := slices.Clone(c.pending)
		sort.Slice(ps, func(i, j int) bool {
			return ps[i].node < ps[j].node || ps[i].node == ps[j].node && ps[i].seq < ps[j].seq
		})
		writeInt(h, int64(len(ps)))
		for _, q := range ps {
			writeInt(h, int64(q.node))
			writeString(h, q.local)
			writeString(h, fmt.Sprintf("%s %v", q.cmd, q.args))
		}
	}
	return h.Sum64(), ok
}
