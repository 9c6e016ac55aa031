// Package harness runs lock strategies on real servers under explicit or
// explored schedules and faults, and judges each run. Every store
// registers a Driver through the contract in store.go (RegisterStore),
// and the harness asks the registry for a strategy's store, a node's and
// a store's title, falling back on none: a strategy whose store is not
// registered is an error naming the package to import. Redis's store is
// still compiled in, and registers itself from redisdriver.go as the
// Main store; every other store is a folder under stores/, and the
// harness imports none of them (harness/harnesstest/memstore is one made
// for the tests).
//
// A newcomer's map, in the order a run goes through it:
//
//	case.go       a scenario and a strategy, resolved once from their names
//	catalog.go    the scenario catalog; scenario.go the Scenario type
//	program.go    the clients' programs
//	schedule.go   steps and schedules, with their text form
//	run.go        one run: Run, its setup, its step loop, its end
//	client.go     the client side: each client's program calling the strategy
//	ops.go        a client's operations (acquire, write, sleep, release, crash) as steps
//	conn.go       Redis's connection wrapper: every Redis command a scheduled step,
//	              sent on a Conn (store.go), the MULTI rule's state kept there
//	scheduler.go  which steps can run, and granting the chosen one
//	events.go     events between steps: crashes, time, node faults
//	store.go      the store contract: Driver, Store, Client (what a store implements)
//	registry.go   the stores registered (RegisterStore, Stores, a strategy's store)
//	redisdriver.go  the Redis store's Driver, "redis", the Main store
//	redisstore.go the Redis store; conn.go its connection wrapper
//	nodes.go      the servers a run uses, and the store of its slot
//	storecells.go the stores' cells: n/a reasons, bounds
//	history.go    the record of a run; check.go the checkers on it
//	explore.go    many schedules of a case, keeping the shortest counterexample
//	prefix.go     the explorer's depth-first walk, and its transaction rule
//	touch.go      what a step reads and writes; redistouch.go Redis's commands'
//	effect.go     what a step did, the harness's part of its footprint
//	sleep.go      sleep sets under the preemption bound (docs/reduction.md)
//	demo.go       one case shown step by step; matrix.go the verdict matrix
//	place.go      placing the matrix's cells on the nodes, several at once
//	pool.go       one pool of runs the matrix's Redis cells share
//	interactive.go  a run whose steps a person picks, checked after each
//
// Rendering a history or a matrix (text timeline, Mermaid, Markdown, HTML)
// is the job of harness/render, which never runs anything.
package harness
