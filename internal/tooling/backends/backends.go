// Package backends names the backends a store's servers run on, one
// vocabulary for every store: its servers as containers, as local
// processes, or servers the user runs and gives by address.
package backends

// The backends, as --backend, $LOCKLAB_BACKEND and each store's
// Options.Backend name them. Every store starts its servers on Docker and
// Process; Redis alone also runs on servers it is given (Addrs).
const (
	Docker  = "docker"
	Process = "process"
	Addrs   = "addrs"
)
