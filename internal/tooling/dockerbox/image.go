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

	"github.com/locklab/locklab/internal/tooling/procid"
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
	files, links, err := imageFiles(img)
	if err != nil {
		return err
	}
	buf, err := buildContext(img, files, links)
	if err != nil {
		return err
	}
	labels := map[string]string{"locklab.image": "1"}
	for k, v := range img.Labels {
		labels[k] = v
	}
	bctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err = cli.BuildImage(dc.BuildImageOptions{
		Name:                img.Tag,
		InputStream:         buf,
		OutputStream:        &out,
		RmTmpContainer:      true,
		ForceRmTmpContainer: true,
		Labels:              labels,
		Context:             bctx,
	})
	if err != nil {
		return fmt.Errorf("docker: building %s: %w\n%s", img.Tag, err, procid.TailLines(out.String(), 10))
	}
	if _, err := cli.InspectImage(img.Tag); err != nil {
		return fmt.Errorf("docker: build finished but %s is missing: %w\n%s", img.Tag, err, procid.TailLines(out.String(), 10))
	}
	return nil
}

// imageFiles is what img holds from the host, by path in the image:
// files (img.Files, /bin/sh, the regular files of img.Trees and the
// shared libraries of every ELF file among them, each → its host path)
// and links (the symbolic links of img.Trees → their targets).
func imageFiles(img Image) (files, links map[string]string, err error) {
	files = map[string]string{"/bin/sh": "/bin/sh"}
	for dst, src := range img.Files {
		files[dst] = src
	}
	links = map[string]string{}
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
			return nil, nil, fmt.Errorf("docker: image %s: %w", img.Tag, err)
		}
	}
	for _, src := range slices.Collect(maps.Values(files)) {
		if !isELF(src) {
			continue
		}
		libs, err := SharedLibs(src)
		if err != nil {
			return nil, nil, fmt.Errorf("docker: image %s: %w", img.Tag, err)
		}
		for _, l := range libs {
			if _, ok := files[l]; !ok {
				files[l] = l
			}
		}
	}
	return files, links, nil
}

// rootfs writes an image's root file system under rootfs/ of a build
// context: each directory once, before what it holds, its parents first.
type rootfs struct {
	tw   *tar.Writer
	now  time.Time
	dirs map[string]bool
}

// dir adds directory d with mode, and its parents not yet added with
// mode 0755.
func (r *rootfs) dir(d string, mode int64) error {
	if d == "/" || d == "." || r.dirs[d] {
		return nil
	}
	if err := r.dir(filepath.Dir(d), 0o755); err != nil {
		return err
	}
	r.dirs[d] = true
	return r.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "rootfs" + d + "/", Mode: mode, ModTime: r.now})
}

// file adds the file name with mode and contents data.
func (r *rootfs) file(name string, mode int64, data []byte) error {
	if err := r.dir(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	if err := r.tw.WriteHeader(&tar.Header{Name: "rootfs" + name, Mode: mode, Size: int64(len(data)), ModTime: r.now}); err != nil {
		return err
	}
	_, err := r.tw.Write(data)
	return err
}

// link adds the symbolic link name → target.
func (r *rootfs) link(name, target string) error {
	if err := r.dir(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return r.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "rootfs" + name, Linkname: target, Mode: 0o777, ModTime: r.now})
}

// buildContext is the tar stream docker builds img from: under rootfs/,
// /tmp, /data, files and links (imageFiles'), /etc/passwd, /etc/group and
// img.Data, each in the order of its path; then a Dockerfile that copies
// rootfs/ into an empty image and sets img.Env.
func buildContext(img Image, files, links map[string]string) (*bytes.Buffer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	r := &rootfs{tw: tw, now: now, dirs: map[string]bool{}}
	if err := r.dir("/tmp", 0o1777); err != nil {
		return nil, err
	}
	if err := r.dir("/data", 0o777); err != nil {
		return nil, err
	}
	for _, dst := range slices.Sorted(maps.Keys(files)) {
		real, err := filepath.EvalSymlinks(files[dst])
		if err != nil {
			return nil, fmt.Errorf("docker: image %s: %w", img.Tag, err)
		}
		st, err := os.Stat(real)
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(real)
		if err != nil {
			return nil, err
		}
		if err := r.file(dst, int64(st.Mode().Perm()), data); err != nil {
			return nil, err
		}
	}
	for _, dst := range slices.Sorted(maps.Keys(links)) {
		if err := r.link(dst, links[dst]); err != nil {
			return nil, err
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
		if err := r.file(dst, 0o644, data[dst]); err != nil {
			return nil, err
		}
	}
	dockerfile := "FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/local/bin:/usr/bin:/bin\n"
	for _, e := range img.Env {
		dockerfile += "ENV " + e + "\n"
	}
	dockerfile += "WORKDIR /data\n"
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), ModTime: now}); err != nil {
		return nil, err
	}
	tw.Write([]byte(dockerfile))
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return &buf, nil
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
