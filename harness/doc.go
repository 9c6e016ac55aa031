// Package harness runs lock strategies on real servers under explicit or
// explored schedules and faults, and judges each run. Every store
// registers a Driver through the contract in store.go (RegisterStore),
// and the harness asks the registry for a strategy's store, a node's and
// a store's title: a strategy whose store is not registered is an error
// naming the package to import, and one whose family names no store (a
// lock of one's own) locks on the store registered as the Main one. Every
// store is a folder under stores/ (stores/redis, the Main store, whose
// servers are the nodes the harness is given, among them), and the
// harness imports none of them (harness/harnesstest/memstore is one made
// for the tests; redis_test.go links stores/redis into the harness's own
// tests).
//
// A newcomer's map, in the order a run goes through it:
//
//	case.go       a scenario and a strategy, resolved once from their names
//	catalog.go    the scenario catalog; scenario.go the Scenario type
//	applies.go    the scenarios' Applies helpers, Lookup and Scenarios
//	program.go    the clients' programs
//	schedule.go   steps and schedules, with their text form
//	run.go        one run: Run, its setup, its step loop, its end
//	client.go     the client side: each client's program calling the strategy
//	ops.go        a client's operations (acquire, write, sleep, release, crash) as steps
//	scheduler.go  which steps can run, and granting the chosen one
//	events.go     events between steps: crashes, time, node faults
//	store.go      the store contract: Driver, Store and the interfaces a store may add
//	storeclient.go a run's client as its store sees it: Client, Conn, Sent
//	registry.go   the stores registered (RegisterStore, Stores, a strategy's store)
//	nodes.go      the servers a run uses, and the store of its slot
//	storecells.go the stores' cells: n/a reasons, bounds
//	history.go    the record of a run; check.go the checkers on it
//	explore.go    many schedules of a case, keeping the shortest counterexample
//	prefix.go     the explorer's depth-first walk, and its transaction rule
//	touch.go      what a step reads and writes
//	effect.go     what a step did, the harness's part of its footprint
//	sleep.go      sleep sets under the preemption bound (docs/reduction.md)
//	demo.go       one case shown step by step; matrix.go the verdict matrix
//	place.go      placing the matrix's cells on the nodes, several at once
//	pool.go       one pool of runs the matrix's Main-store (Redis) cells share
//	interactive.go  a run whose steps a person picks, checked after each
//
// Rendering a history or a matrix (text timeline, Mermaid, Markdown, HTML)
// is the job of harness/render, which never runs anything.
package harness
