// Images built locally from the host's files: FROM scratch, with the
// binaries asked for, the shared libraries they link, and the host's
// /bin/sh, which supervises the server of each container.

package dockerbox

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
)

// Image is an image to build from the host's files.
type Image struct {
	// Tag names it, e.g. "locklab/etcd:3.4.23-1": the version of what it
	// runs and the revision of its layout, so that an image of an older
	// layout is not reused.
	Tag string
	// Files are copied into it: path in the image → path on the host (a
	// link is followed). The shared libraries of each ELF file among them
	// come along, at the paths the loader opens.
	Files map[string]string
	// Trees are directories copied whole: path in the image → directory
	// on the host. Skip, when set, leaves out the host paths it names.
	Trees map[string]string
	Skip  func(hostPath string) bool
	// Data are files given whole: path → contents.
	Data map[string][]byte
	// Env are the image's environment variables ("NAME=value").
	Env []string
	// Labels are set on the image, beside locklab.image=1.
	Labels map[string]string
}

var building sync.Mutex

// Ensure builds img unless an image tagged img.Tag exists already.
func Ensure(ctx context.Context, cli *dc.Client, img Image) error {
	building.Lock()
	defer building.Unlock()
	if _, err := cli.InspectImage(img.Tag); err == nil {
		return nil
	}
	return build(ctx, cli, img)
}

// build builds img FROM scratch: img's files, /bin/sh and the shared
// libraries of every ELF file, /tmp, /data and an /etc/passwd.
func build(ctx context.Context, cli *dc.Client, img Image) error {
	files := map[string]string{"/bin/sh": "/bin/sh"}
	for dst, src := range img.Files {
		files[dst] = src
	}
	links := map[string]string{}
	for dst, root := range img.Trees {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if img.Skip != nil && img.Skip(p) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			in := filepath.Join(dst, rel)
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				t, err := os.Readlink(p)
				if err != nil {
					return err
				}
				links[in] = t
			case d.Type().IsRegular():
				files[in] = p
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("docker: image %s: %w", img.Tag, err)
		}
	}
	for _, src := range slices.Collect(maps.Values(files)) {
		if !isELF(src) {
			continue
		}
		libs, err := SharedLibs(src)
		if err != nil {
			return fmt.Errorf("docker: image %s: %w", img.Tag, err)
		}
		for _, l := range libs {
			if _, ok := files[l]; !ok {
				files[l] = l
			}
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dirs := map[string]bool{}
	var addDir func(d string, mode int64) error
	addDir = func(d string, mode int64) error {
		if d == "/" || d == "." || dirs[d] {
			return nil
		}
		if err := addDir(filepath.Dir(d), 0o755); err != nil {
			return err
		}
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "rootfs" + d + "/", Mode: mode, ModTime: now})
	}
	addFile := func(name string, mode int64, data []byte) error {
		if err := addDir(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "rootfs" + name, Mode: mode, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := addDir("/tmp", 0o1777); err != nil {
		return err
	}
	if err := addDir("/data", 0o777); err != nil {
		return err
	}
	for _, dst := range slices.Sorted(maps.Keys(files)) {
		real, err := filepath.EvalSymlinks(files[dst])
		if err != nil {
			return fmt.Errorf("docker: image %s: %w", img.Tag, err)
		}
		st, err := os.Stat(real)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(real)
		if err != nil {
			return err
		}
		if err := addFile(dst, int64(st.Mode().Perm()), data); err != nil {
			return err
		}
	}
	for _, dst := range slices.Sorted(maps.Keys(links)) {
		if err := addDir(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "rootfs" + dst, Linkname: links[dst], Mode: 0o777, ModTime: now}); err != nil {
			return err
		}
	}
	data := map[string][]byte{
		"/etc/passwd": []byte("root:x:0:0:root:/root:/sbin/nologin\nlocklab:x:" + User + ":" + User + ":locklab:/data:/bin/sh\n"),
		"/etc/group":  []byte("root:x:0:\nlocklab:x:" + User + ":\n"),
	}
	for k, v := range img.Data {
		data[k] = v
	}
	for _, dst := range slices.Sorted(maps.Keys(data)) {
		if err := addFile(dst, 0o644, data[dst]); err != nil {
			return err
		}
	}
	dockerfile := "FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/local/bin:/usr/bin:/bin\n"
	for _, e := range img.Env {
		dockerfile += "ENV " + e + "\n"
	}
	dockerfile += "WORKDIR /data\n"
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), ModTime: now}); err != nil {
		return err
	}
	tw.Write([]byte(dockerfile))
	if err := tw.Close(); err != nil {
		return err
	}
	labels := map[string]string{"locklab.image": "1"}
	for k, v := range img.Labels {
		labels[k] = v
	}
	bctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := cli.BuildImage(dc.BuildImageOptions{
		Name:                img.Tag,
		InputStream:         &buf,
		OutputStream:        &out,
		RmTmpContainer:      true,
		ForceRmTmpContainer: true,
		Labels:              labels,
		Context:             bctx,
	})
	if err != nil {
		return fmt.Errorf("docker: building %s: %w\n%s", img.Tag, err, TailLines(out.String(), 10))
	}
	if _, err := cli.InspectImage(img.Tag); err != nil {
		return fmt.Errorf("docker: build finished but %s is missing: %w\n%s", img.Tag, err, TailLines(out.String(), 10))
	}
	return nil
}

// User is the uid and gid of the unprivileged user "locklab" of the
// images built here.
const User = "999"

func isELF(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	n, _ := f.Read(magic[:])
	return n == 4 && string(magic[:]) == "\x7fELF"
}

// SharedLibs lists the absolute paths of the libraries and loader bin
// links, from ldd. A static binary has none.
func SharedLibs(bin string) ([]string, error) {
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
		if line == "" || strings.Contains(line, "statically linked") {
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

// TailLines returns the last n lines of s.
func TailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
