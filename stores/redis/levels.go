// Redis's challenges in locklab play, easiest first: the first levels of
// the game, before the other stores'.

package redis

import "github.com/locklab/locklab/harness"

// playLevels are the store's challenges in locklab play
// (harness.Driver.PlayLevels).
var playLevels = []harness.PlayLevel{
	{ID: "c1c2", Scenario: "stale-recovery", Strategy: "setnx-del", Docs: "setnx_getset.md",
		Title: "The C1/C2 race",
		Goal:  "Make C1 and C2 both hold the setnx-del lock. C3 holds it and will crash; let its TTL pass, then interleave C1 and C2."},
	{ID: "getset-skew", Scenario: "clock-skew", Strategy: "setnx-getset", Docs: "setnx_getset.md",
		Title: "GETSET and a fast clock",
		Goal:  "GETSET closed the C1/C2 race. Break setnx-getset anyway: two clients holding at once, with a clock that runs ahead."},
	{ID: "no-expire", Scenario: "crash-before-expire", Strategy: "setnx-expire", Docs: "setnxex.md",
		Title: "Locked out forever",
		Goal:  "Make setnx-expire refuse everyone, for ever: crash its holder at the right moment."},
	{ID: "wrong-release", Scenario: "release-after-expiry", Strategy: "set-nx-px-del", Docs: "setnxex.md",
		Title: "Releasing someone else's lock",
		Goal:  "Make C1's release delete C2's lock on set-nx-px-del (SET NX PX, released with a blind DEL)."},
	{ID: "set-nx-px", Scenario: "stale-recovery", Strategy: "set-nx-px", Docs: "setnxex.md", Safe: true,
		Title: "Break set-nx-px (you can't: why?)",
		Goal:  "The same three clients as the C1/C2 race, on SET NX PX with a token-checked release. Try every order you like, let time pass; then play the run to its end.",
		Why:   "One command, SET key token NX PX ttl, both tests and takes the lock, and Redis runs commands one at a time: there is no gap between a GET and a DEL for another client to slip into. The release is a script that deletes the key only if it still holds the client's own token."},
	{ID: "gc-pause", Scenario: "pause-past-ttl", Strategy: "set-nx-px", Docs: "fencing-and-watchdogs.md",
		Title: "A GC pause past the TTL",
		Goal:  "No fault to choose here: C1 sleeps past its TTL. Make C1 write to the resource after C2, its successor, has written."},
	{ID: "fenced", Scenario: "pause-past-ttl-fenced", Strategy: "set-nx-px-getdel", Docs: "fencing-and-watchdogs.md",
		Title: "A resource that checks fences, a lock that has none",
		Goal:  "The resource now refuses a fence number lower than one it has seen. set-nx-px-getdel hands out none: make the stale write go through."},
	{ID: "redlock-pause", Scenario: "redlock-pause", Strategy: "redlock", Docs: "redlock.md",
		Title: "Redlock's holder writes after its successor",
		Goal:  "Three Redis nodes. C1 wins a majority and then pauses past the TTL. Make C1 write after C2, its successor."},
	{ID: "redlock-restart", Scenario: "redlock-restart", Strategy: "redlock", Docs: "redlock.md",
		Title: "A Redlock node forgets",
		Goal:  "Make C1 and C2 both hold a majority: restart n2, without persistence, at the right moment."},
	{ID: "failover", Scenario: "failover-loses-lock", Strategy: "set-nx-px", Docs: "setnxex.md",
		Title: "The replica never saw it",
		Goal:  "n1 has an asynchronous replica. Make C1 and C2 both hold set-nx-px by failing over at the right moment."},
	{ID: "lost-reply", Scenario: "lost-reply", Strategy: "setnx-expire", Docs: "setnxex.md",
		Title: "Locked out by a lost reply",
		Goal: "Make setnx-expire refuse everyone, for ever, with no client crashed. You may lose the reply to one of " +
			"C1's requests (lose(c1)): Redis carries it out, and C1's connection drops before the answer comes. " +
			"C1 tries again once.",
		Answer: "lose(c1) c1 c1 c2"},
}
