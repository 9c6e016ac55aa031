// Cleanup on a signal: the open clusters of this process are closed when
// SIGINT or SIGTERM arrives, then the signal is delivered again
// (internal/tooling/cleanup).

package redisnode

import "github.com/locklab/locklab/internal/tooling/cleanup"

// track registers c; the first open cluster installs the signal handler.
func track(c *Cluster) { cleanup.Track(c) }

// untrack forgets c; the last one removes the signal handler.
func untrack(c *Cluster) { cleanup.Untrack(c) }
