// Package stress runs a lock under real concurrency and real time: many
// clients loop acquire, critical section, release against the real servers
// of its store with millisecond TTLs, while clients pause past their TTL,
// crash between two requests, or run on skewed clocks. The critical section is a
// Jepsen-style read-modify-write of a shared register, so the damage a broken
// lock does is measured, not guessed:
//
//   - overlapping holds: two clients inside the critical section at once,
//     from intervals read on one monotonic clock;
//   - lost updates: increments the register does not show at the end;
//   - stale accesses refused by the register's fence check, for strategies
//     whose leases carry fence numbers (a refusal is the fence doing its job);
//   - liveness: a stretch of time in which clients keep trying and nobody
//     acquires, classified as a deadlock (the key has no TTL) or starvation
//     (the key has a TTL that failed attempts keep pushing forward).
//
// # Process mode
//
// With Options.Processes every client is a separate OS process (the hidden
// "locklab worker" command, or any program that calls Worker), so a pause is
// a real SIGSTOP of the whole process, continued with SIGCONT PauseFor later,
// and a crash is a real SIGKILL, after which a replacement process is
// started. Workers run the lock against the servers' addresses themselves
// and report each step as a JSON line on stdout; the parent stamps each line
// on its own monotonic clock as it arrives. Workers are killed when the run
// ends, when ctx is done, and by the kernel if the parent dies (Pdeathsig);
// a worker whose stdin closes exits too.
//
// The register stays in the parent: a worker's two accesses (the read when
// it enters the critical section, the write when it leaves) are requests on
// its stdout that the parent answers on its stdin, after checking the fence
// and the overlap exactly as for goroutine clients. Keeping it in the parent
// rather than under a key on the first node means node faults (a restart
// that wipes the node, a pause, a partition) hit only the lock, never the
// measuring instrument, and one checker serves both modes.
//
// What the timing means: the interval the parent checks for overlaps runs
// from the register's read to its write, both performed by the parent under
// one mutex, so the order it sees is the order in which the resource was
// accessed. Each such interval lies inside the worker's real hold (the read
// is requested after the acquire returned; the release is sent after the
// write was answered), so pipe latency narrows the measured intervals
// rather than widening them: an overlap reported is a real overlap of two
// holds (at the moment of the second read, both were holding), but two
// holds that overlapped by less than the pipe round trip, without
// interleaving their register accesses, are not reported. Those are
// overlaps that did no damage at the resource. The timeline's event times,
// "acquires" and "releases" included, are arrival times and lag the
// workers' real steps by the pipe latency (plus any scheduling delay of the
// parent).
//
// # Node faults
//
// Options.Faults injects node faults during a run, in goroutine or process
// mode, one at a time, drawn from the seed (and the node each strikes,
// Strike.Pick): a node paused, killed and restarted with or without its
// data, partitioned, or failed over, for FaultFor, then resumed, started
// again or healed, as the store strikes its servers. Each fault is in
// Report.NodeFaults and in the timelines (as client NodeFaultClient).
//
// # Stores
//
// The lock lives on the servers of its store, which Options.Store holds,
// and whose folder under stores/ registers stress mode's side of it
// (store.go's StoreDriver, found by the strategy's family): the store
// connects each client, goroutine incarnation or worker process, on its
// own, empties the servers before the run (or, on servers of others,
// sweeps what the run wrote after it), strikes them with node faults of
// its own (StoreDriver.Faults) and tells a deadlock from starvation. A
// worker process is told the store with --store, and how to reach its
// servers with the --store-arg values the store gives. The failovers of a
// store's servers (a master's replica promoted, a standby promoted) are
// the store's faults, described in its package.
package stress
