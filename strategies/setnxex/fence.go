package setnxex

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/lockkit"
)

// Fence counters. Each lock key has its own counter, a string key holding
// the last fence number drawn for it (INCR), named after the lock key so
// that both live in one Redis Cluster hash slot, where one script can
// touch both:
//
//   - a key with a hash tag (a '{', then the first '}' after it with at
//     least one character between) keeps it: "{user:7}:lock" has the
//     counter "{user:7}:lock:locklab:fence";
//   - any other key becomes the tag: "orders:42" has the counter
//     "{orders:42}:locklab:fence", whose slot is that of the whole key;
//   - a key with no tag that contains a '}' ("a}b", "{}x") cannot be a tag
//     (the tag would end at its first '}'), so its counter carries the tag
//     of its slot's floor instead: "{locklab:floor:N}:a}b:locklab:fence".
//
// "x" and "{x}" have the same counter, "{x}:locklab:fence": both lock keys
// draw from it, which keeps each one's numbers growing.
//
// Counters never expire. Each costs its name and some 50 bytes of server
// memory (MEMORY USAGE of the counter of "orders:42": 72 bytes on Redis
// 7.0, 88 on a cluster node; docs/fencing-and-watchdogs.md), for every key
// ever locked. ReclaimFence and ReclaimFences delete counters without
// letting any key's fence numbers go back: a deleted counter's last number
// is folded into its slot's floor (FloorKey), and a counter created where
// none exists starts above the floor.

// FenceSuffix ends the name of every fence counter.
const FenceSuffix = ":locklab:fence"

// floorPrefix starts the name of every floor key, and of the counters of
// keys that contain a '}' but no hash tag. Lock keys that start with it are
// refused.
const floorPrefix = "{locklab:floor:"

// FenceHash is the hash where set-nx-px kept every key's fence counter
// before counters moved next to their lock keys (field: the lock key).
// Scripts touching it and a lock key of another hash slot fail on a Redis
// Cluster (CROSSSLOT). MigrateFenceHash moves its counters.
const FenceHash = "locklab:fences"

// FenceKey returns the name of the fence counter of lock key key, in key's
// hash slot.
func FenceKey(key string) string {
	if _, ok := hashTag(key); ok {
		return key + FenceSuffix
	}
	if !strings.Contains(key, "}") {
		return "{" + key + "}" + FenceSuffix
	}
	return FloorKey(key) + ":" + key + FenceSuffix
}

// FloorKey returns the floor of the fence counters of key's hash slot:
// "{locklab:floor:N}", with N the least number that puts the key in that
// slot. It holds the largest number of any counter of the slot that was
// reclaimed, and is absent until one is.
func FloorKey(key string) string {
	return floorPrefix + strconv.FormatUint(uint64(floorTags()[Slot(key)]), 10) + "}"
}

// hashTag returns the hash tag of key as Redis Cluster finds it: after the
// first '{', up to the first '}' after it, when there is at least one
// character between them.
func hashTag(key string) (string, bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return "", false
	}
	n := strings.IndexByte(key[open+1:], '}')
	if n <= 0 {
		return "", false
	}
	return key[open+1 : open+1+n], true
}

// Slot returns key's Redis Cluster hash slot: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384.
func Slot(key string) int {
	if tag, ok := hashTag(key); ok {
		key = tag
	}
	return int(crc16(0, key) % 16384)
}

// crc16 continues a CRC16-XMODEM (polynomial 0x1021, no reflection), the
// checksum Redis Cluster hashes keys with, over s.
func crc16(crc uint16, s string) uint16 {
	t := crcTable()
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ t[byte(crc>>8)^s[i]]
	}
	return crc
}

// crcTable is CRC16-XMODEM's table: the checksum of each byte value.
var crcTable = sync.OnceValue(func() *[256]uint16 {
	var t [256]uint16
	for b := range t {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return &t
})

// floorTags returns, for each hash slot, the least N such that
// "locklab:floor:N" hashes to it. The table is computed once, at first use
// (a few milliseconds).
var floorTags = sync.OnceValue(func() *[16384]uint32 {
	var (
		t      [16384]uint32
		found  [16384]bool
		left   = len(t)
		base   = crc16(0, floorPrefix[1:])
		digits = []byte{'0'} // n in decimal, counted up in place
	)
	for n := uint32(0); left > 0; n++ {
		crc := base
		for _, d := range digits {
			crc = crc<<8 ^ crcTable()[byte(crc>>8)^d]
		}
		if s := crc % 16384; !found[s] {
			found[s], t[s] = true, n
			left--
		}
		i := len(digits) - 1
		for ; i >= 0 && digits[i] == '9'; i-- {
			digits[i] = '0'
		}
		if i < 0 {
			digits = append([]byte{'1'}, digits...)
		} else {
			digits[i]++
		}
	}
	return &t
})

// isFenceKey reports whether key names a fence counter or a floor, which
// cannot be a lock: a lock there would break the counters of other keys.
func isFenceKey(key string) bool {
	if strings.HasPrefix(key, floorPrefix) {
		return true
	}
	base, ok := strings.CutSuffix(key, FenceSuffix)
	if !ok {
		return false
	}
	return FenceKey(base) == key
}

var (
	//go:embed reclaim.lua
	reclaimSrc string
	//go:embed migrate.lua
	migrateSrc string

	reclaimScript = rcmd.NewScript("set-nx-px.reclaim", 2, reclaimSrc)
	migrateScript = rcmd.NewScript("set-nx-px.migrate", 1, migrateSrc)
)

// ReclaimFence deletes the fence counter of lock key key on the server src
// reaches (a cluster client reaches the key's master), folding its last
// number into the floor of the key's hash slot: the next lock of key, or of
// any key of that slot without a counter, draws a number above it. It
// returns the counter's last number, or 0 when it had none.
//
// It is safe while the lock is held or acquired: numbers still grow.
// Reclaiming makes the next numbers of the slot's new counters jump; it
// does not make any go back, unless someone deletes the floor key.
func ReclaimFence(ctx context.Context, src locklab.ConnSource, key string) (int64, error) {
	if key == "" {
		return 0, lockkit.Invalid("empty key")
	}
	c, err := rcmd.Conn(ctx, src)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return reclaim(ctx, c, FenceKey(key))
}

func reclaim(ctx context.Context, c redis.Conn, fenceKey string) (int64, error) {
	v, err := reclaimScript.Do(ctx, c, fenceKey, FloorKey(fenceKey))
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	return n, nil
}

// ReclaimFences reclaims, as ReclaimFence does, every fence counter on the
// server src reaches, leaving only the floors of their slots: at most one
// small key per hash slot however many keys were ever locked. Each key's
// next fence is then one more than its slot's floor, a jump but never a
// step back, whatever acquires run meanwhile. It walks the server's keys
// with SCAN, so on a Redis Cluster give it a source on each master in turn
// (a redigo pool on the master's address), not a cluster client. It returns
// how many counters it reclaimed.
//
// (Counters hold small integers, which Redis shares between keys, so OBJECT
// IDLETIME cannot tell an idle counter from a busy one.)
func ReclaimFences(ctx context.Context, src locklab.ConnSource) (int, error) {
	c, err := rcmd.Conn(ctx, src)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	reclaimed := 0
	cursor := "0"
	for {
		v, err := redis.Values(rcmd.Do(ctx, c, "SCAN", cursor, "MATCH", "*"+FenceSuffix, "COUNT", 1000))
		if err != nil {
			return reclaimed, err
		}
		var keys []string
		if _, err := redis.Scan(v, &cursor, &keys); err != nil {
			return reclaimed, lockkit.Unavailable(err)
		}
		for _, k := range keys {
			if !isFenceKey(k) {
				continue // a key of someone else's that only looks like one
			}
			n, err := reclaim(ctx, c, k)
			if err != nil {
				return reclaimed, fmt.Errorf("set-nx-px: reclaiming %q: %w", k, err)
			}
			if n != 0 {
				reclaimed++
			}
		}
		if cursor == "0" {
			return reclaimed, nil
		}
	}
}

// MigrateFenceHash moves the counters an earlier set-nx-px kept in the hash
// FenceHash on the server src reaches to the per-key counters (FenceKey),
// so that fence numbers keep growing across the upgrade: each counter
// becomes the larger of its number in the hash and the number already in
// its own key, and its field leaves the hash. Run it once, before or while
// the new version takes locks; an acquire by the new version between its
// first lock and the migration of that key draws a number that may be
// lower than the old one, which a resource that checks fences refuses.
// It returns how many counters it moved.
func MigrateFenceHash(ctx context.Context, src locklab.ConnSource) (int, error) {
	c, err := rcmd.Conn(ctx, src)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	moved := 0
	cursor := "0"
	for {
		// Fields deleted during the scan do not make it skip the others.
		v, err := redis.Values(rcmd.Do(ctx, c, "HSCAN", FenceHash, cursor, "COUNT", 1000))
		if err != nil {
			return moved, err
		}
		var pairs []string
		if _, err := redis.Scan(v, &cursor, &pairs); err != nil {
			return moved, lockkit.Unavailable(err)
		}
		for i := 0; i+1 < len(pairs); i += 2 {
			key, n := pairs[i], pairs[i+1]
			if _, err := migrateScript.Do(ctx, c, FenceKey(key), n); err != nil {
				return moved, fmt.Errorf("set-nx-px: moving the fence counter of %q: %w", key, err)
			}
			if _, err := rcmd.Do(ctx, c, "HDEL", FenceHash, key); err != nil {
				return moved, err
			}
			moved++
		}
		if cursor == "0" {
			return moved, nil
		}
	}
}
