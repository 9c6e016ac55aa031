// What each Redis command reads and writes, for the explorer's reduction
// (harness/touch.go): the keys it names, a script's KEYS, a channel it publishes
// on; nothing for a command that only answers (PING), or that a
// transaction queues (its effect is EXEC's).

package redis

import (
	"slices"
	"strconv"
	"strings"

	"github.com/locklab/locklab/harness"
)

// redisKeyRes names key on node (0: the key on whatever node the run's
// commands reach; see redisTouch).
func redisKeyRes(node int, key string) string {
	if node == 0 {
		return "key:" + key
	}
	return "n" + strconv.Itoa(node) + "/key:" + key
}

// The commands the stores' strategies send, by what their arguments are:
// readKeys and writeKeys name one key first (the rest are values) or, for
// the variadic ones, only keys.
var (
	readOneKey  = set("GET", "PTTL", "TTL", "PEXPIRETIME", "EXPIRETIME", "TYPE", "STRLEN", "HGET", "HEXISTS", "HGETALL", "HLEN", "LLEN", "LRANGE")
	readKeys    = set("EXISTS", "MGET")
	writeOneKey = set("SET", "SETNX", "GETSET", "GETDEL", "GETEX", "INCR", "INCRBY", "DECR", "DECRBY",
		"EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT", "PERSIST", "SETEX", "PSETEX",
		"HSET", "HSETNX", "HDEL", "HINCRBY", "LPUSH", "RPUSH", "LPOP", "RPOP")
	writeKeys = set("DEL", "UNLINK")
	// nothing: commands that change no key and read none (SCRIPT LOAD
	// fills the script cache, which changes no answer: the harness runs
	// the EVAL redigo sends after a NOSCRIPT in the EVALSHA's step).
	nothing = set("PING", "ECHO", "MULTI", "DISCARD", "UNWATCH", "SCRIPT")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// redisTouch is what cmd with args reads and writes on node, keys named
// with redisKeyRes(node, …) (node 0 for a run whose nodes replicate one
// another, where a key on one node is the key on every node), in the
// namespace tagged tag (namespace.Namespace; "" for none): keys are named
// without the tag, which differs from one worker to the next, so that what
// one run's step touched compares with another run's. nil, which
// conflicts with everything, for a command it does not know, a malformed
// one, and WAIT, which moves what a replica holds.
func redisTouch(tag string, node int, cmd string, args []any) *harness.Touch {
	c := strings.ToUpper(cmd)
	keys := func(from, to int) []string {
		var out []string
		for i := from; i < to && i < len(args); i++ {
			k := argString(args[i])
			if tag != "" {
				k = strings.TrimPrefix(k, tag+":")
			}
			out = append(out, redisKeyRes(node, k))
		}
		return out
	}
	switch {
	case nothing[c]:
		return &harness.Touch{}
	case readOneKey[c] && len(args) >= 1:
		return &harness.Touch{Reads: keys(0, 1)}
	case readKeys[c] && len(args) >= 1:
		return &harness.Touch{Reads: keys(0, len(args))}
	case writeOneKey[c] && len(args) >= 1:
		return &harness.Touch{Writes: keys(0, 1)}
	case writeKeys[c] && len(args) >= 1:
		return &harness.Touch{Writes: keys(0, len(args))}
	case c == "WATCH" && len(args) >= 1:
		return &harness.Touch{Reads: keys(0, len(args))}
	case (c == "EVAL" || c == "EVALSHA") && len(args) >= 2:
		// A script may read and write each of its KEYS, and nothing else
		// (a script that reaches other keys breaks Redis's own rule).
		n, err := strconv.Atoi(argString(args[1]))
		if err != nil || n < 0 || 2+n > len(args) {
			return nil
		}
		return &harness.Touch{Writes: keys(2, 2+n)}
	case c == "PUBLISH" && len(args) >= 1:
		return &harness.Touch{Writes: []string{"channel:" + argString(args[0])}}
	}
	return nil
}

// union is what the steps touching ts touch together (nil if any is).
func union(ts ...*harness.Touch) *harness.Touch {
	u := &harness.Touch{}
	for _, t := range ts {
		if t == nil {
			return nil
		}
		u.Reads = append(u.Reads, t.Reads...)
		u.Writes = append(u.Writes, t.Writes...)
	}
	return u
}

// argString is an argument as Redis sees it.
func argString(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return harness.FormatValue(a)
}

// touchOf is what a call touches on the connection k: a transaction's
// queued commands nothing (Redis answers QUEUED), its EXEC what they touch
// together, with the keys WATCH read; a pipeline what its commands touch
// together. It keeps the connection's transaction state for that: inTx
// tells whether a MULTI that succeeded opened one (harness.Conn.Transaction).
func (k *conn) touchOf(node int, cmd string, args []any, queued [][]any, inTx bool) *harness.Touch {
	var ts []*harness.Touch
	for _, q := range queued {
		name, _ := q[0].(string)
		ts = append(ts, k.touchOne(node, name, q[1:], &inTx))
	}
	if cmd != "" {
		ts = append(ts, k.touchOne(node, cmd, args, &inTx))
	}
	return union(ts...)
}

// txTouch is what a connection's open transaction has queued, and the
// keys it watches.
type txTouch struct {
	queued  harness.Touch
	all     bool // a queued command the store does not know
	watched []string
}

// touchOne is touchOf for one command; inTx follows the transaction.
func (k *conn) touchOne(node int, cmd string, args []any, inTx *bool) *harness.Touch {
	tag := ""
	if k.st != nil {
		tag = k.st.ns.String()
	}
	t := redisTouch(tag, node, cmd, args)
	switch strings.ToUpper(cmd) {
	case "MULTI":
		*inTx = true
		k.tx.queued, k.tx.all = harness.Touch{}, false
	case "EXEC":
		*inTx = false
		out := &harness.Touch{Reads: append(slices.Clone(k.tx.queued.Reads), k.tx.watched...), Writes: k.tx.queued.Writes}
		if k.tx.all {
			out = nil
		}
		k.tx = txTouch{}
		return out
	case "DISCARD":
		*inTx = false
		k.tx = txTouch{}
	case "UNWATCH":
		k.tx.watched = nil
	case "WATCH":
		if t != nil {
			k.tx.watched = append(k.tx.watched, t.Reads...)
		}
	default:
		if !*inTx {
			return t
		}
		if t == nil {
			k.tx.all = true
		} else {
			k.tx.queued.Reads = append(k.tx.queued.Reads, t.Reads...)
			k.tx.queued.Writes = append(k.tx.queued.Writes, t.Writes...)
		}
		return &harness.Touch{}
	}
	return t
}
