// The docker backend's image: the one asked for when present or pullable,
// else one built FROM scratch from the host's redis-server.

package redisnode

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/procid"
	"github.com/locklab/locklab/internal/tooling/redisproc"
)

// DefaultImage is the image the docker backend runs when neither
// Options.Image nor $LOCKLAB_REDIS_IMAGE names one.
const DefaultImage = "redis:7"

// LocalImageRepo is the repository of the images built from the host's
// redis-server; the tag is its version and the layout's revision, e.g.
// "locklab/redis:7.0.15-2".
const LocalImageRepo = "locklab/redis"

// localImageRevision names the layout of the images built locally; it
// changes when their contents do, so that an image of an older layout is
// not reused. Revision 2 adds the host's /bin/sh, which supervises the
// container's redis-server (kills and starts it), and its ip command, which
// takes the container's network interface down and up for a partition.
const localImageRevision = "2"

// pullTimeout bounds an image pull: machines without a registry must not
// wait for one.
const pullTimeout = 5 * time.Second

// resolvedImage is the image containers run.
type resolvedImage struct {
	name  string
	built bool   // built locally from the host's redis-server
	from  string // that binary
	// noShell: the image has no /bin/sh (built on a host without one), so
	// its containers run redis-server as their first process.
	noShell bool
}

var images struct {
	mu   sync.Mutex
	done map[string]resolvedImage
}

// ensureImage returns an image to run for the requested name: the name
// itself when present locally or pullable within pullTimeout, else an image
// built from the host's redis-server (reused when it already exists).
func ensureImage(ctx context.Context, cli *dc.Client, want string) (resolvedImage, error) {
	if want == "" {
		want = os.Getenv("LOCKLAB_REDIS_IMAGE")
	}
	if want == "" {
		want = DefaultImage
	}
	images.mu.Lock()
	defer images.mu.Unlock()
	if img, ok := images.done[want]; ok {
		if _, err := cli.InspectImage(img.name); err == nil {
			return img, nil
		}
	}
	img, err := findOrBuild(ctx, cli, want)
	if err != nil {
		return img, err
	}
	if images.done == nil {
		images.done = map[string]resolvedImage{}
	}
	images.done[want] = img
	return img, nil
}

func findOrBuild(ctx context.Context, cli *dc.Client, want string) (resolvedImage, error) {
	if _, err := cli.InspectImage(want); err == nil {
		return resolvedImage{name: want}, nil
	}
	bin, binErr := redisproc.Binary()
	var local string
	if binErr == nil {
		local = LocalImageRepo + ":" + redisVersion(bin) + "-" + localImageRevision
		if info, err := cli.InspectImage(local); err == nil {
			return resolvedImage{name: local, built: true, from: bin, noShell: !hasShellLabel(info)}, nil
		}
	}
	pullErr := pull(ctx, cli, want)
	if pullErr == nil {
		return resolvedImage{name: want}, nil
	}
	if binErr != nil {
		return resolvedImage{}, fmt.Errorf("docker: image %s is not present and could not be pulled (%v), "+
			"and no local image can be built: %v", want, pullErr, binErr)
	}
	shell, err := buildImage(ctx, cli, bin, local)
	if err != nil {
		return resolvedImage{}, fmt.Errorf("docker: image %s is not present and could not be pulled (%v); "+
			"building %s from %s failed: %w", want, pullErr, local, bin, err)
	}
	return resolvedImage{name: local, built: true, from: bin, noShell: !shell}, nil
}

// labelShell marks a locally built image that holds /bin/sh.
const labelShell = "locklab.shell"

func hasShellLabel(img *dc.Image) bool {
	return img.Config != nil && img.Config.Labels[labelShell] == "1"
}

// hostShell is the host's /bin/sh, or "" when there is none.
func hostShell() string {
	if _, err := os.Stat("/bin/sh"); err != nil {
		return ""
	}
	return "/bin/sh"
}

// hostIP is the host's ip command (iproute2), or "" when there is none.
func hostIP() string {
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// pull tries to pull ref within pullTimeout.
func pull(ctx context.Context, cli *dc.Client, ref string) error {
	repo, tag := ref, "latest"
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo, tag = ref[:i], ref[i+1:]
	}
	pctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	err := cli.PullImage(dc.PullImageOptions{
		Repository: repo, Tag: tag, Context: pctx,
		InactivityTimeout: pullTimeout, OutputStream: io.Discard,
	}, dc.AuthConfiguration{})
	if err != nil {
		return err
	}
	if _, err := cli.InspectImage(ref); err != nil {
		return err
	}
	return nil
}

var versionRE = regexp.MustCompile(`v=([0-9][0-9A-Za-z.\-]*)`)

// redisVersion is the version of bin, e.g. "7.0.15", or "unknown".
func redisVersion(bin string) string {
	if m := versionRE.FindStringSubmatch(redisproc.Version(bin)); m != nil {
		return m[1]
	}
	return "unknown"
}

// buildImage builds tag FROM scratch with bin, the host's /bin/sh if there
// is one (it reports whether) and its ip command if there is one, the
// shared libraries they link (as ldd lists them) and the dynamic loader. No
// registry is involved.
func buildImage(ctx context.Context, cli *dc.Client, bin, tag string) (shell bool, err error) {
	files := map[string]string{"/usr/local/bin/redis-server": bin}
	if sh := hostShell(); sh != "" {
		files["/bin/sh"] = sh
		if ip := hostIP(); ip != "" {
			files["/bin/ip"] = ip
		}
	}
	for _, exe := range []string{bin, files["/bin/sh"], files["/bin/ip"]} {
		if exe == "" {
			continue
		}
		libs, err := sharedLibs(exe)
		if err != nil {
			return false, err
		}
		for _, l := range libs {
			files[l] = l
		}
	}
	shell = files["/bin/sh"] != ""
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dirs := map[string]bool{}
	addDir := func(d string, mode int64) error {
		if d == "/" || d == "." || dirs[d] {
			return nil
		}
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "rootfs" + d + "/", Mode: mode, ModTime: now})
	}
	var addParents func(p string) error
	addParents = func(p string) error {
		d := filepath.Dir(p)
		if d == "/" || dirs[d] {
			return nil
		}
		if err := addParents(d); err != nil {
			return err
		}
		return addDir(d, 0o755)
	}
	addFile := func(name string, mode int64, data []byte) error {
		if err := addParents(name); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "rootfs" + name, Mode: mode, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"/data", "/tmp", "/etc"} {
		mode := int64(0o755)
		if d == "/tmp" {
			mode = 0o1777
		}
		if err := addDir(d, mode); err != nil {
			return false, err
		}
	}
	for dst, src := range files {
		// ldd names libraries by the path the loader opens; store the file
		// the link points to under that path.
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return false, err
		}
		data, err := os.ReadFile(real)
		if err != nil {
			return false, err
		}
		if err := addFile(dst, 0o755, data); err != nil {
			return false, err
		}
	}
	if err := addFile("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nredis:x:999:999:redis:/data:/sbin/nologin\n")); err != nil {
		return false, err
	}
	if err := addFile("/etc/group", 0o644, []byte("root:x:0:\nredis:x:999:\n")); err != nil {
		return false, err
	}
	dockerfile := "FROM scratch\n" +
		"COPY rootfs/ /\n" +
		"ENV PATH=/usr/local/bin:/usr/bin:/bin\n" +
		"WORKDIR /data\n" +
		"EXPOSE 6379\n" +
		"CMD [\"redis-server\"]\n"
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), ModTime: now}); err != nil {
		return false, err
	}
	tw.Write([]byte(dockerfile))
	if err := tw.Close(); err != nil {
		return false, err
	}
	labels := map[string]string{"locklab.image": "1", "locklab.from": bin}
	if shell {
		labels[labelShell] = "1"
	}
	bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err = cli.BuildImage(dc.BuildImageOptions{
		Name:                tag,
		InputStream:         &buf,
		OutputStream:        &out,
		RmTmpContainer:      true,
		ForceRmTmpContainer: true,
		Labels:              labels,
		Context:             bctx,
	})
	if err != nil {
		return false, fmt.Errorf("%w\n%s", err, tailLines(out.String(), 10))
	}
	if _, err := cli.InspectImage(tag); err != nil {
		return false, fmt.Errorf("build finished but %s is missing: %w\n%s", tag, err, tailLines(out.String(), 10))
	}
	return shell, nil
}

// sharedLibs lists the absolute paths of the libraries and loader bin links,
// from ldd. A static binary has none.
func sharedLibs(bin string) ([]string, error) { return dockerbox.SharedLibs(bin) }

func tailLines(s string, n int) string { return procid.TailLines(s, n) }
