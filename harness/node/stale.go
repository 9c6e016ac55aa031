// What earlier runs left behind: the containers and networks of a process
// that is gone, removed when a docker cluster starts.

package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locklab/locklab/internal/procid"
)

// RemoveStale removes the containers and networks that an earlier run on
// this host left behind: those labelled locklab whose owning process is gone.
// Those of live processes (such as parallel test binaries) stay. Start calls
// it on the docker backend; it does nothing when no engine answers.
func RemoveStale(ctx context.Context) error {
	pool, err := dockerClient(ctx)
	if err != nil {
		return nil
	}
	cli := pool.Client
	host, _ := os.Hostname()
	filter := map[string][]string{"label": {LabelKey + "=1", LabelHost + "=" + host}}
	stale := func(labels map[string]string) bool {
		pid, err := strconv.Atoi(labels[LabelPid])
		if err != nil {
			return false
		}
		return !procid.Alive(pid, labels[LabelPidStart])
	}
	cs, err := cli.ListContainers(dc.ListContainersOptions{All: true, Filters: filter, Context: ctx})
	if err != nil {
		return fmt.Errorf("docker: listing containers: %w", err)
	}
	var errs []error
	for _, c := range cs {
		if stale(c.Labels) {
			err := cli.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true, RemoveVolumes: true, Context: ctx})
			if err != nil && !goneOrGoing(err) {
				errs = append(errs, fmt.Errorf("docker: removing stale container %s: %w", c.ID[:12], err))
			}
		}
	}
	nws, err := cli.FilteredListNetworks(dc.NetworkFilterOpts{"label": {LabelKey + "=1": true, LabelHost + "=" + host: true}})
	if err != nil {
		return fmt.Errorf("docker: listing networks: %w", err)
	}
	for _, n := range nws {
		if !stale(n.Labels) {
			continue
		}
		// Its containers may still be on their way out (removed by another
		// run at the same moment): give them a moment.
		for attempt := 0; ; attempt++ {
			err := cli.RemoveNetwork(n.ID)
			if err == nil || goneOrGoing(err) {
				break
			}
			if attempt == 20 || ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("docker: removing stale network %s: %w", n.Name, err))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// goneOrGoing reports whether err says the object no longer exists or is
// being removed already.
func goneOrGoing(err error) bool {
	var nc *dc.NoSuchContainer
	var nn *dc.NoSuchNetwork
	var de *dc.Error
	return errors.As(err, &nc) || errors.As(err, &nn) ||
		(errors.As(err, &de) && (de.Status == 404 || de.Status == 409 && strings.Contains(de.Message, "already in progress")))
}
