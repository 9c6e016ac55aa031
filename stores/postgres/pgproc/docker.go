// The docker backend: a throwaway cluster in a container on a network of
// its own, from an image built locally from the host's PostgreSQL (its
// server binaries and libraries, its share directory; dockerbox: nothing
// is pulled). The container runs as an unprivileged user, which runs
// initdb and postgres; its first process is the dockerbox supervisor,
// which starts the postmaster and sends the signals of the faults while
// the container stays up at the same address: a kill is a SIGKILL of the
// postmaster (its backends notice and exit), a restart a new postmaster on
// the same data directory (in memory, kept while the container lives), a
// pause a SIGSTOP of every server process. Clients connect to the
// container's address, port 5432; a partition is cut through a proxy in
// front of it (internal/tooling/tcpproxy), as on the process backend.
//
// A standby runs in a container of its own on its primary's network: the
// unprivileged user makes its data directory with pg_basebackup -R from
// the primary's container address, which primary_conninfo then names,
// and the standby streams from there. The network is shared: the last of
// the primary and its standbys to close removes it, so that a standby
// promoted after its primary closed keeps its address.

package pgproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/locklab/locklab/internal/tooling/cleanup"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
)

// ImageRepo is the repository of the images built from the host's
// PostgreSQL; the tag is its version and the layout's revision, e.g.
// "locklab/postgres:15.14-1".
const ImageRepo = "locklab/postgres"

// imageRevision names the layout of the image; it changes when its
// contents do.
const imageRevision = "1"

// dockerPort is the port the server listens on in its container.
const dockerPort = 5432

// dockerData is the data directory in the container.
const dockerData = "/data/pg"

// image describes the image built from the binaries of binDir
// (/usr/lib/postgresql/N/bin): the tree above it (bin and lib, without
// the LLVM JIT, which jit=off leaves unused), the share directory
// /usr/share/postgresql/N, and the UTC zone the server's time zone is.
func image(binDir string) (dockerbox.Image, error) {
	root := filepath.Dir(binDir)
	major := filepath.Base(root)
	share := filepath.Join("/usr/share/postgresql", major)
	if st, err := os.Stat(share); err != nil || !st.IsDir() {
		return dockerbox.Image{}, fmt.Errorf("pgproc: no share directory %s for the binaries of %s", share, binDir)
	}
	ver := "unknown"
	if f := strings.Fields(Version(binDir)); len(f) >= 3 {
		ver = f[2]
	}
	img := dockerbox.Image{
		Tag:   ImageRepo + ":" + ver + "-" + imageRevision,
		Trees: map[string]string{root: root, share: share},
		Skip: func(p string) bool {
			b := filepath.Base(p)
			return strings.HasPrefix(b, "llvmjit") || b == "bitcode"
		},
		Files:  map[string]string{},
		Env:    []string{"LC_ALL=C", "TZ=UTC"},
		Labels: map[string]string{"locklab.from": binDir},
	}
	for _, z := range []string{"UTC", "Etc/UTC", "GMT"} {
		if p := filepath.Join("/usr/share/zoneinfo", z); fileExists(p) {
			img.Files[p] = p
		}
	}
	return img, nil
}

// boxNet is the network of a docker primary and its standbys, and the
// image their containers run.
type boxNet struct {
	*dockerbox.Network
	image string

	mu       sync.Mutex
	refs     int // servers on the network that are not closed
	standbys int // standby containers named so far
}

// release forgets one server on the network; the last removes it.
func (n *boxNet) release() error {
	n.mu.Lock()
	n.refs--
	last := n.refs == 0
	n.mu.Unlock()
	if !last {
		return nil
	}
	return n.Remove()
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// startDocker makes the cluster with initdb in a new container and starts
// postgres on it.
func startDocker(ctx context.Context, opts Options) (_ *Server, err error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	img, err := image(bin)
	if err != nil {
		return nil, err
	}
	nw, err := dockerbox.NewNetwork(ctx, "postgres", opts.Label)
	if err != nil {
		return nil, err
	}
	s := &Server{DataDir: dockerData, BinDir: bin, opts: opts, net: &boxNet{Network: nw, image: img.Tag, refs: 1}, Port: dockerPort}
	s.initProc()
	cleanup.Track(s)
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := dockerbox.Ensure(ctx, nw.Pool.Client, img); err != nil {
		return nil, err
	}
	box, err := nw.Run(ctx, dockerbox.Spec{Name: "pg", Image: img.Tag, User: dockerbox.User + ":" + dockerbox.User,
		Tmpfs: map[string]string{"/data": "rw,uid=" + dockerbox.User + ",gid=" + dockerbox.User + ",mode=0700"}})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.closed
	s.proc.SetBox(box)
	s.Host = box.IP
	s.mu.Unlock()
	if closed { // Close ran meanwhile, on a signal
		box.Remove()
		return nil, errors.New("pgproc: server closed")
	}
	if err := box.Do(ctx, "run "+filepath.Join(bin, "initdb")+" -D "+dockerData+" -U "+SuperUser+" -A trust"+
		" -E UTF8 --locale=C --no-sync --no-instructions", nil); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, box.LogTail(10))
	}
	// Clients come from the host, through the network's gateway; the
	// replication connections of standbys from their containers on the
	// network.
	if err := box.Do(ctx, "write "+dockerData+"/pg_hba.conf", []string{
		"local all all trust", "host all all 0.0.0.0/0 trust", "host all all ::/0 trust",
		"host replication all 0.0.0.0/0 trust", "host replication all ::/0 trust",
	}); err != nil {
		return nil, err
	}
	if err := s.launch(ctx, dockerPort); err != nil {
		return nil, err
	}
	return s, nil
}

// startDockerStandby is StartStandby of a docker primary: a container of
// its own on the primary's network, whose data directory pg_basebackup -R
// makes from the primary's container address.
func (s *Server) startDockerStandby(ctx context.Context, opts Options) (_ *Server, err error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("pgproc: server closed")
	}
	nw := s.net
	nw.mu.Lock()
	nw.refs++
	nw.standbys++
	name := "pg-standby" + strconv.Itoa(nw.standbys)
	nw.mu.Unlock()
	opts.Backend = BackendDocker
	sb := &Server{DataDir: dockerData, BinDir: s.BinDir, opts: opts, net: nw, Port: dockerPort}
	sb.initProc()
	cleanup.Track(sb)
	defer func() {
		if err != nil {
			sb.Close()
		}
	}()
	box, err := nw.Run(ctx, dockerbox.Spec{Name: name, Image: nw.image, User: dockerbox.User + ":" + dockerbox.User,
		Tmpfs: map[string]string{"/data": "rw,uid=" + dockerbox.User + ",gid=" + dockerbox.User + ",mode=0700"}})
	if err != nil {
		return nil, err
	}
	sb.mu.Lock()
	closed = sb.closed
	sb.proc.SetBox(box)
	sb.Host = box.IP
	sb.mu.Unlock()
	if closed { // Close ran meanwhile, on a signal
		box.Remove()
		return nil, errors.New("pgproc: server closed")
	}
	// -R writes standby.signal and a primary_conninfo with these -h, -p
	// and -U: the primary's address on the network.
	if err := sb.tool(ctx, "pg_basebackup", "-D", dockerData, "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-h", s.Host, "-p", strconv.Itoa(s.Port), "-U", SuperUser, "-w"); err != nil {
		return nil, err
	}
	if err := sb.launch(ctx, dockerPort); err != nil {
		return nil, err
	}
	if err := sb.waitStreaming(ctx); err != nil {
		return nil, err
	}
	return sb, nil
}

// closeBox removes the container and, when no other server of the
// primary's is on it any more, the network; s.mu is held.
func (s *Server) closeBox() error {
	var err error
	if box := s.proc.Box(); box != nil {
		err = box.Remove()
	}
	s.proc.Kill() // its container gone, nothing runs
	return errors.Join(err, s.net.release())
}

// Backend names the backend the server runs on.
func (s *Server) Backend() string {
	if s.net != nil {
		return BackendDocker
	}
	return BackendProcess
}

// Describe tells what runs the server: "process 127.0.0.1:port
// (postgres (PostgreSQL) 15.14 ...)" or "container NAME at address:5432
// (...)".
func (s *Server) Describe() string {
	what := "process"
	if box := s.proc.Box(); box != nil {
		what = "container " + box.String() + " at"
	}
	return fmt.Sprintf("%s %s:%d (%s)", what, s.Host, s.Port, Version(s.BinDir))
}
