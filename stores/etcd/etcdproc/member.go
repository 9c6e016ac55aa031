// One member: its status, client and process, the faults done to it (kill,
// restart, pause, resume) and its log.

package etcdproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab/internal/tooling/serverproc"
)

// Status asks m for its status (maintenance API), within 1s or ctx.
func (m *Member) Status(ctx context.Context) (*clientv3.StatusResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return m.client.Status(cctx, m.ClientURL)
}

// Client is the cluster's client on m's endpoint alone; it belongs to the
// cluster, which closes it: do not close it.
func (m *Member) Client() *clientv3.Client { return m.client }

// Restart kills the process if it runs and starts it again with the same
// flags on the same data directory, so that it comes back with its raft
// log and database and rejoins as the same member. It returns once m
// serves a linearizable read: it has caught up with the leader.
func (m *Member) Restart(ctx context.Context) error { return m.restart(ctx, false) }

// RestartEmpty is Restart on an emptied data directory, as after a lost
// disk: the process is killed, its data directory removed, and it is
// started with the same flags, so that etcd bootstraps it again as the
// member its name, peer URL and cluster token make (the same member and
// cluster ids) with none of the raft log or database it had. It returns
// once m serves a linearizable read, or with the tail of m's log where m
// exits (etcd panics on a leader's commit index beyond its empty log).
// The process backend only.
func (m *Member) RestartEmpty(ctx context.Context) error {
	if m.Box() != nil {
		return errors.New("etcdproc: RestartEmpty on the docker backend")
	}
	return m.restart(ctx, true)
}

func (m *Member) restart(ctx context.Context, empty bool) error {
	wctx, cancel := context.WithTimeout(ctx, m.c.opts.StartTimeout)
	defer cancel()
	return m.Relaunch(wctx, func() error {
		if empty {
			if err := os.RemoveAll(m.DataDir); err != nil {
				return err
			}
		}
		if err := m.launch(m.c.initialCluster()); err != nil {
			return err
		}
		return m.c.waitHealthy(wctx, []*Member{m})
	}, serverproc.PortTaken)
}

// LogTail returns the last n lines of the member's log.
func (m *Member) LogTail(n int) string { return m.Proc.LogTail(m.LogPath, n) }

// String returns the member's name.
func (m *Member) String() string { return m.Name }

// StartEmptyAlone is RestartEmpty for a member whose peers are all down:
// it starts m in the background and returns once m's log says that m
// started its raft node ("starting local member"): with no peer to ask
// whether m was bootstrapped before, etcd bootstraps it afresh, as the
// same member of the same cluster, with an empty log. Its peers may then
// start. done gives RestartEmpty's end, once m serves a linearizable read
// (a quorum has come up) or has failed. The process backend only.
func (m *Member) StartEmptyAlone(ctx context.Context) (done <-chan error, err error) {
	if m.Box() != nil {
		return nil, errors.New("etcdproc: RestartEmpty on the docker backend")
	}
	const started = "starting local member"
	from := logSize(m.LogPath)
	end := make(chan error, 1)
	go func() { end <- m.RestartEmpty(ctx) }()
	for !logHas(m.LogPath, from, started) {
		select {
		case err := <-end:
			if err == nil {
				err = errors.New("it served before its log said so")
			}
			return nil, fmt.Errorf("etcd member %s: its start ended before its log said %q: %w", m.Name, started, err)
		case <-ctx.Done():
			return nil, fmt.Errorf("etcd member %s: waiting for its log to say %q: %w", m.Name, started, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return end, nil
}

// logSize is the size of the log at path, 0 where there is none.
func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logHas reports whether the log at path holds word past its first from
// bytes.
func logHas(path string, from int64, word string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, from, 1<<40))
	return err == nil && strings.Contains(string(b), word)
}
