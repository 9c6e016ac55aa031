package dockerbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEndpoints: calls that add endpoints run side by side; one that
// removes them waits for those running and runs alone.
func TestEndpoints(t *testing.T) {
	var e Endpoints
	// Two Adds at once: the first returns only once the second has begun.
	second := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.Add(func() error {
			select {
			case <-second:
				return nil
			case <-time.After(10 * time.Second):
				return fmt.Errorf("the second Add did not run beside the first")
			}
		})
	}()
	require.NoError(t, e.Add(func() error { close(second); return nil }))
	require.NoError(t, <-done)

	// A Remove waits for a running Add, and Removes do not overlap.
	release := make(chan struct{})
	added := make(chan struct{})
	go e.Add(func() error { close(added); <-release; return nil })
	<-added
	var running, most atomic.Int32
	var removed atomic.Int32
	finished := make(chan struct{}, 3)
	for range 3 {
		go func() {
			e.Remove(func() error {
				n := running.Add(1)
				if n > most.Load() {
					most.Store(n)
				}
				time.Sleep(5 * time.Millisecond)
				running.Add(-1)
				removed.Add(1)
				return nil
			})
			finished <- struct{}{}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	assert.Zero(t, removed.Load(), "a Remove ran beside an Add")
	close(release)
	for range 3 {
		<-finished
	}
	assert.Equal(t, int32(3), removed.Load())
	assert.Equal(t, int32(1), most.Load(), "Removes ran side by side")
}

// engineEvents returns the engine's events from since to until, in order.
func engineEvents(t *testing.T, cli *dc.Client, since, until time.Time) []dc.APIEvents {
	u, err := url.Parse(cli.Endpoint())
	require.NoError(t, err)
	base := "http://" + u.Host
	if u.Scheme != "unix" && cli.TLSConfig != nil {
		t.Skip("reads the engine's events over its socket or plain TCP only")
	}
	tr := &http.Transport{}
	if u.Scheme == "unix" {
		base = "http://engine"
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", u.Path)
		}
	}
	stamp := func(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(
		base + "/events?since=" + stamp(since) + "&until=" + stamp(until))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out []dc.APIEvents
	dec := json.NewDecoder(resp.Body)
	for {
		var ev dc.APIEvents
		if err := dec.Decode(&ev); err == io.EOF {
			return out
		} else {
			require.NoError(t, err)
		}
		out = append(out, ev)
	}
}

// TestRemoveLeavesNetworkFirst: Remove takes a running container off its
// network before the engine kills it, so that the endpoint goes in a call
// of its own (see Endpoints), not in the container's exit.
func TestRemoveLeavesNetworkFirst(t *testing.T) {
	n, c := testBox(t)
	id := c.ID
	since := time.Now().Add(-time.Second)
	require.NoError(t, c.Remove())
	require.NoError(t, n.Remove())
	var order []string
	for _, ev := range engineEvents(t, n.Pool.Client, since, time.Now().Add(time.Second)) {
		switch {
		case ev.Type == "network" && ev.Actor.Attributes["container"] == id && ev.Action == "disconnect",
			ev.Type == "container" && ev.Actor.ID == id && (ev.Action == "die" || ev.Action == "destroy"):
			// The engine may tell of one disconnection twice.
			if len(order) == 0 || order[len(order)-1] != ev.Action {
				order = append(order, ev.Action)
			}
		}
	}
	assert.Equal(t, []string{"disconnect", "die", "destroy"}, order)
}
