// The servers' class data archive: the classes a ZooKeeper server loads,
// parsed and laid out once per machine, which each local JVM maps instead
// of loading them again. A cell that kills or restarts a server starts a
// JVM every schedule, and a JVM's start is most of that schedule's CPU.

package zkproc

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/tooling/serverproc"
)

// classList names the classes the archive holds, as -XX:DumpLoadedClassList
// wrote them on servers of an ensemble that started, elected a leader,
// served sessions and had members killed and restarted.
//
//go:embed classes.lst
var classList []byte

// jvmFlags are the flags of every server's java that an archive must be
// dumped with to be mapped: the heap's size and collector, and C1 alone.
var jvmFlags = []string{"-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}

// archives are the archives this process has asked for, by path: each is
// dumped at most once per process.
var archives sync.Map // path → *archive

// archive is the class data archive of one installation, in the user's
// cache directory.
type archive struct {
	path string
	once sync.Once
}

// archiveOf returns inst's archive, nil where there is no cache
// directory. The path says what the archive was dumped from (java, the
// class path, the flags, the list), so a changed installation dumps
// another.
func archiveOf(inst installation) *archive {
	dir, err := os.UserCacheDir()
	if err != nil {
		return nil
	}
	return archiveIn(filepath.Join(dir, "locklab", "zookeeper"), inst)
}

// archiveIn is inst's archive in the directory dir.
func archiveIn(dir string, inst installation) *archive {
	h := sha256.New()
	for _, f := range append([]string{inst.java}, inst.jars...) {
		fmt.Fprintln(h, f)
		if real, err := filepath.EvalSymlinks(f); err == nil {
			if st, err := os.Stat(real); err == nil {
				fmt.Fprintln(h, real, st.Size(), st.ModTime().UnixNano())
			}
		}
	}
	fmt.Fprintln(h, inst.classpath, strings.Join(jvmFlags, " "))
	h.Write(classList)
	path := filepath.Join(dir, hex.EncodeToString(h.Sum(nil))[:16]+".jsa")
	a, _ := archives.LoadOrStore(path, &archive{path: path})
	return a.(*archive)
}

// flags returns the flags that map the archive into a server's java, none
// while it has not been dumped; the first call starts dumping it in the
// background, so a server started before it is done starts without it.
func (a *archive) flags(inst installation) []string {
	if a == nil {
		return nil
	}
	if f := a.flagsNow(); f != nil {
		return f
	}
	a.once.Do(func() { go a.dump(inst) })
	return nil
}

// flagsNow returns the flags that map the archive, nil while there is
// none.
func (a *archive) flagsNow() []string {
	if _, err := os.Stat(a.path); err != nil {
		return nil
	}
	return []string{"-XX:SharedArchiveFile=" + a.path}
}

// dump writes the archive: java dumps it from the class list into a file
// of its own, renamed into place once complete, so a java that maps it
// never sees half of one and two processes dumping at once do no harm.
// An archive java cannot dump is no error: the servers start without.
func (a *archive) dump(inst installation) error {
	dir := filepath.Dir(a.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	removeStaleDumps(dir)
	tmp, err := os.MkdirTemp(dir, "dump-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	list := filepath.Join(tmp, "classes.lst")
	if err := os.WriteFile(list, classList, 0o644); err != nil {
		return err
	}
	out := filepath.Join(tmp, "archive.jsa")
	args := append(append([]string{inst.java}, jvmFlags...),
		"-Xshare:dump", "-XX:SharedClassListFile="+list, "-XX:SharedArchiveFile="+out, "-cp", inst.classpath)
	cmd := serverproc.Spec{Local: args, Dir: tmp}.Command()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("zkproc: dumping the class data archive: %v: %s", err, lastLine(b))
	}
	return os.Rename(out, a.path)
}

// removeStaleDumps removes what dumps left in dir that a process killed
// before it could: a dump takes seconds, so one an hour old is dead.
func removeStaleDumps(dir string) {
	old, _ := filepath.Glob(filepath.Join(dir, "dump-*"))
	for _, d := range old {
		if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) > time.Hour {
			os.RemoveAll(d)
		}
	}
}

// lastLine is the last line of b that says something.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
