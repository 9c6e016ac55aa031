// The docker backend's image: the one asked for when present or pullable,
// else one built FROM scratch from the host's redis-server.

package node

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locklab/locklab/internal/redisproc"
)

// DefaultImage is the image the docker backend runs when neither
// Options.Image nor $LOCKLAB_REDIS_IMAGE names one.
const DefaultImage = "redis:7"

// LocalImageRepo is the repository of the images built from the host's
// redis-server; the tag is its version, e.g. "locklab/redis:7.0.15".
const LocalImageRepo = "locklab/redis"

// pullTimeout bounds an image pull: machines without a registry must not
// wait for one.
const pullTimeout = 5 * time.Second

// resolvedImage is the image containers run.
type resolvedImage struct {
	name  string
	built bool   // built locally from the host's redis-server
	from  string // that binary
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
		local = LocalImageRepo + ":" + redisVersion(bin)
		if _, err := cli.InspectImage(local); err == nil {
			return resolvedImage{name: local, built: true, from: bin}, nil
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
	if err := buildImage(ctx, cli, bin, local); err != nil {
		return resolvedImage{}, fmt.Errorf("docker: image %s is not present and could not be pulled (%v); "+
			"building %s from %s failed: %w", want, pullErr, local, bin, err)
	}
	return resolvedImage{name: local, built: true, from: bin}, nil
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

// buildImage builds tag FROM scratch with bin, the shared libraries it links
// (as ldd lists them) and the dynamic loader. No registry is involved.
func buildImage(ctx context.Context, cli *dc.Client, bin, tag string) error {
	files := map[string]string{"/usr/local/bin/redis-server": bin}
	libs, err := sharedLibs(bin)
	if err != nil {
		return err
	}
	for _, l := range libs {
		files[l] = l
	}
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
			return err
		}
	}
	for dst, src := range files {
		// ldd names libraries by the path the loader opens; store the file
		// the link points to under that path.
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(real)
		if err != nil {
			return err
		}
		if err := addFile(dst, 0o755, data); err != nil {
			return err
		}
	}
	if err := addFile("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nredis:x:999:999:redis:/data:/sbin/nologin\n")); err != nil {
		return err
	}
	if err := addFile("/etc/group", 0o644, []byte("root:x:0:\nredis:x:999:\n")); err != nil {
		return err
	}
	dockerfile := "FROM scratch\n" +
		"COPY rootfs/ /\n" +
		"ENV PATH=/usr/local/bin:/usr/bin:/bin\n" +
		"WORKDIR /data\n" +
		"EXPOSE 6379\n" +
		"CMD [\"redis-server\"]\n"
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), ModTime: now}); err != nil {
		return err
	}
	tw.Write([]byte(dockerfile))
	if err := tw.Close(); err != nil {
		return err
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
		Labels:              map[string]string{"locklab.image": "1", "locklab.from": bin},
		Context:             bctx,
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tailLines(out.String(), 10))
	}
	if _, err := cli.InspectImage(tag); err != nil {
		return fmt.Errorf("build finished but %s is missing: %w\n%s", tag, err, tailLines(out.String(), 10))
	}
	return nil
}

// sharedLibs lists the absolute paths of the libraries and loader bin links,
// from ldd. A static binary has none.
func sharedLibs(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %v: %s", bin, err, out)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("ldd %s: %s", bin, line)
		}
		field := line
		if _, after, ok := strings.Cut(line, "=>"); ok {
			field = after
		}
		if f := strings.Fields(field); len(f) > 0 && strings.HasPrefix(f[0], "/") {
			libs = append(libs, f[0])
		}
	}
	return libs, nil
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
