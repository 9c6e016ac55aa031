package dockerbox

import (
	"context"
	"errors"
	"strings"
	"sync"

	dc "github.com/ory/dockertest/v3/docker"
)

// Endpoints orders the engine calls that add endpoints to one network (a
// container started on it or connected to it) and those that remove them
// (a container disconnected from it, or killed while on it).
//
// Docker Engine before 28.1 keeps a count of each network's endpoints and
// refuses to remove a network whose count is not zero ("has active
// endpoints"). Updates of that count made at the same moment can be lost
// (moby/moby#42119). A lost decrement leaves a network with no container
// and a count above zero, which the engine refuses to remove until it
// restarts. Seen here when several containers of one network were removed
// at once, as Close and Ctrl-C do. So calls that remove endpoints run one
// at a time, and never beside one that adds. Calls that add endpoints may
// run side by side: a lost increment leaves the count too low, and only the
// removal of the network reads it, once its containers are gone.
type Endpoints struct{ mu sync.RWMutex }

// Add runs f, which may add endpoints to the network but removes none.
func (e *Endpoints) Add(f func() error) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return f()
}

// Remove runs f, which may remove endpoints of the network, alone.
func (e *Endpoints) Remove(f func() error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return f()
}

// Detach disconnects container id from network netID, alone (Remove), so
// that the container's removal that follows takes no endpoint of the
// network with it: the engine releases the endpoint within this call. A
// container that is gone, or not on the network, is no error.
func (e *Endpoints) Detach(cli *dc.Client, netID, id string) error {
	return e.Remove(func() error {
		err := cli.DisconnectNetwork(netID, dc.NetworkConnectionOptions{Container: id, Force: true})
		var gone *dc.NoSuchNetworkOrContainer
		var de *dc.Error
		if err == nil || GoneOrGoing(err) || errors.As(err, &gone) ||
			errors.As(err, &de) && strings.Contains(de.Message, "is not connected to network") {
			return nil
		}
		return err
	})
}

// RemoveContainer removes container id, taking it off the networks netIDs
// first (Detach), one at a time: its removal then takes no endpoint with
// it. A container that fails to leave a network is removed all the same;
// one already gone is no error.
func (e *Endpoints) RemoveContainer(ctx context.Context, cli *dc.Client, id string, netIDs ...string) error {
	var detached []error
	for _, netID := range netIDs {
		detached = append(detached, e.Detach(cli, netID, id))
	}
	err := cli.RemoveContainer(dc.RemoveContainerOptions{ID: id, Force: true, RemoveVolumes: true, Context: ctx})
	if err != nil && !GoneOrGoing(err) {
		return errors.Join(append([]error{err}, detached...)...)
	}
	return nil
}
