// The docker backend: each server in a container of its own, on a network
// of the ensemble's own, from an image built locally from the host's JRE
// and ZooKeeper jars (dockerbox: nothing is pulled). The image holds the
// java launcher and libjvm with the shared libraries they link, the rest
// of the runtime (its other libraries, the modules image, the class data
// sharing archive, conf/) as plain files at the same paths, and the jars
// of the class path. A container's first process is the dockerbox
// supervisor, which starts, signals and kills the server's JVM while the
// container stays up at the same address: a kill is a SIGKILL of the JVM,
// a restart a new JVM on the same data directory (/data, in memory, kept
// while the container lives), a pause a SIGSTOP. Clients reach each server
// at its container's address, port 2181 (peers on 2888, elections on
// 3888); a partition is cut through a proxy in front of that address
// (internal/tooling/tcpproxy), as on the process backend.

package zkproc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/locklab/locklab/internal/tooling/cleanup"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/serverproc"
)

// ImageRepo is the repository of the images built from the host's
// ZooKeeper and JRE; the tag is their versions and the layout's revision,
// e.g. "locklab/zookeeper:3.8.0-java17.0.15-1".
const ImageRepo = "locklab/zookeeper"

// imageRevision names the layout of the image; it changes when its
// contents do.
const imageRevision = "1"

// The ports a server listens on in its container.
const (
	dockerClientPort   = 2181
	dockerPeerPort     = 2888
	dockerElectionPort = 3888
)

// ErrNoImage is wrapped by the error of a docker start whose image cannot
// be made from this host's files.
var ErrNoImage = errors.New("zkproc: no ZooKeeper image can be built from this host")

// jreOf finds the JRE of java: its home (the directory above bin/java),
// the launcher's real path and the JRE's version.
func jreOf(java string) (home, launcher, version string, err error) {
	launcher, err = filepath.EvalSymlinks(java)
	if err != nil {
		return "", "", "", fmt.Errorf("%w: %v", ErrNoImage, err)
	}
	home = filepath.Dir(filepath.Dir(launcher))
	if !isFile(filepath.Join(home, "lib", "server", "libjvm.so")) || !isFile(filepath.Join(home, "lib", "modules")) {
		return "", "", "", fmt.Errorf("%w: %s is not laid out as a Java 9 or later runtime (lib/server/libjvm.so, lib/modules)", ErrNoImage, home)
	}
	version = "unknown"
	if b, err := os.ReadFile(filepath.Join(home, "release")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "JAVA_VERSION="); ok {
				version = dockerbox.Sanitize(strings.Trim(v, `"`))
			}
		}
	}
	return home, launcher, version, nil
}

// skipped are the runtime's files the image leaves out: sources, the
// compiler's symbols, the desktop's and sound's libraries (which link
// libraries a headless host may lack), and its helper programs.
var skipped = map[string]bool{
	"src.zip": true, "ct.sym": true, "classes_nocoops.jsa": true,
	"libawt_xawt.so": true, "libsplashscreen.so": true, "libjsound.so": true,
	"libatk-wrapper.so": true, "libjawt.so": true, "jexec": true, "jspawnhelper": true,
}

// image describes the image of inst. The launcher and libjvm are copied
// as programs (dockerbox adds the libraries they link); the runtime's
// other libraries link libjvm, which the loader finds only through the
// launcher, so they, and every other file of lib/ and conf/ (links
// followed: Debian's point into /etc/java-*), come as plain files.
func image(inst installation, tag, home, launcher string) (dockerbox.Image, error) {
	jvm := filepath.Join(home, "lib", "server", "libjvm.so")
	img := dockerbox.Image{
		Tag:    tag,
		Files:  map[string]string{launcher: launcher, jvm: jvm},
		Data:   map[string][]byte{},
		Labels: map[string]string{"locklab.from": inst.jar + " " + home},
	}
	for _, j := range inst.jars {
		img.Files[j] = j
	}
	for _, sub := range []string{"lib", "conf"} {
		err := filepath.WalkDir(filepath.Join(home, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || skipped[d.Name()] || img.Files[p] != "" {
				return nil
			}
			st, err := os.Stat(p) // a link followed
			if err != nil || !st.Mode().IsRegular() {
				return nil // a dangling link (cacerts without ca-certificates-java)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			img.Data[p] = b
			return nil
		})
		if err != nil {
			return dockerbox.Image{}, fmt.Errorf("%w: %v", ErrNoImage, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(home, "release")); err == nil {
		img.Data[filepath.Join(home, "release")] = b
	}
	return img, nil
}

// startDocker starts an ensemble of opts.Servers containers.
func startDocker(ctx context.Context, inst installation, opts Options) (_ *Ensemble, err error) {
	home, launcher, jre, err := jreOf(inst.java)
	if err != nil {
		return nil, err
	}
	nw, err := dockerbox.NewNetwork(ctx, "zookeeper", opts.Label)
	if err != nil {
		return nil, err
	}
	e := &Ensemble{Java: launcher, Jar: inst.jar, classpath: inst.classpath, opts: opts, net: nw}
	for i := range opts.Servers {
		s := &Server{Index: i, ID: i + 1, e: e, DataDir: "/data", ConfigPath: "/tmp/zoo.cfg",
			clientPort: dockerClientPort, peerPort: dockerPeerPort, electionPort: dockerElectionPort}
		s.What, s.Timeout = "zkproc: server "+s.Name(), opts.StartTimeout
		e.servers = append(e.servers, s)
	}
	// Tracked once its servers are set: a signal's Close reads no field
	// the start still writes.
	cleanup.Track(e)
	defer func() {
		if err != nil {
			e.Close()
			e.closeDocker() // what was made after a Close on a signal
		}
	}()
	tag := ImageRepo + ":" + dockerbox.Sanitize(versionOf(inst.jar)) + "-java" + jre + "-" + imageRevision
	if _, ierr := nw.Pool.Client.InspectImage(tag); ierr != nil {
		img, err := image(inst, tag, home, launcher)
		if err != nil {
			return nil, err
		}
		if err := dockerbox.Ensure(ctx, nw.Pool.Client, img); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoImage, err)
		}
	}
	// The containers come up side by side: each costs the engine a few
	// tenths of a second.
	var wg sync.WaitGroup
	errs := make([]error, len(e.servers))
	for i, s := range e.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			box, err := nw.Run(ctx, dockerbox.Spec{Name: s.Name(), Image: tag,
				Tmpfs: map[string]string{"/data": "rw,mode=0755"}})
			if err != nil {
				errs[i] = err
				return
			}
			s.host = box.IP
			s.SetBox(box)
			if e.closed.Load() { // Close ran meanwhile: it may not have seen box
				box.Remove()
				errs[i] = errors.New("zkproc: ensemble closed")
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, s := range e.servers {
		if err := s.Box().Do(ctx, "write "+filepath.Join(s.DataDir, "myid"), []string{strconv.Itoa(s.ID)}); err != nil {
			return nil, err
		}
		if err := s.Box().Do(ctx, "write "+s.ConfigPath, s.config()); err != nil {
			return nil, err
		}
	}
	for _, s := range e.servers {
		if err := s.launch(); err != nil {
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := e.waitHealthy(wctx, e.servers); err != nil {
		return nil, err
	}
	if err := e.identify(wctx); err != nil {
		return nil, err
	}
	return e, nil
}

// closeDocker removes the containers and the network.
func (e *Ensemble) closeDocker() error {
	var ps []*serverproc.Proc
	for _, s := range e.servers {
		ps = append(ps, &s.Proc)
	}
	return errors.Join(serverproc.RemoveBoxes(ps...), e.net.Remove())
}
