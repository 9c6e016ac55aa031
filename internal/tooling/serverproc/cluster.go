// What the servers of a cluster (etcdproc's members, zkproc's servers)
// share: their start on free ports, and the removal of their containers.

package serverproc

import (
	"context"
	"errors"
	"sync"
)

// OnFreePorts calls start, which picks free ports and starts servers on
// them, three times at the most while it fails with ErrPortTaken: another
// process may take a port between the pick and the server's bind.
func OnFreePorts[T any](ctx context.Context, start func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range 3 {
		if v, err = start(); err == nil || !PortTaken(err) || ctx.Err() != nil {
			break
		}
	}
	return v, err
}

// RemoveBoxes removes the containers of ps side by side (each removal
// costs the engine a few tenths of a second); a process on this host is
// passed over.
func RemoveBoxes(ps ...*Proc) error {
	var wg sync.WaitGroup
	errs := make([]error, len(ps))
	for i, p := range ps {
		if box := p.Box(); box != nil {
			wg.Go(func() { errs[i] = box.Remove() })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
