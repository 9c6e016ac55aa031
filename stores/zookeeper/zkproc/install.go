// Where ZooKeeper and java are found, and what the servers' class path is.

package zkproc

import (
	"archive/zip"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// InstallHint tells how to get ZooKeeper where it is missing.
const InstallHint = "run scripts/ensure-zookeeper.sh (Debian/Ubuntu: apt-get install -y zookeeper, " +
	"which brings a JRE; not zookeeperd, which starts a system service), " +
	"or set LOCKLAB_ZOOKEEPER to the ZooKeeper jar and LOCKLAB_JAVA to a java binary"

// DebianJar is where Debian's zookeeper package puts the server's jar.
const DebianJar = "/usr/share/java/zookeeper.jar"

// Binary returns the ZooKeeper jar the servers run: $LOCKLAB_ZOOKEEPER,
// else DebianJar. The error carries InstallHint.
func Binary() (string, error) {
	if p := os.Getenv("LOCKLAB_ZOOKEEPER"); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return "", fmt.Errorf("LOCKLAB_ZOOKEEPER=%q is not the ZooKeeper jar: %s", p, InstallHint)
		}
		return p, nil
	}
	if st, err := os.Stat(DebianJar); err == nil && !st.IsDir() {
		return DebianJar, nil
	}
	return "", errors.New("ZooKeeper not found (no " + DebianJar + "): " + InstallHint)
}

// Java returns the java binary the servers run on: $LOCKLAB_JAVA, else
// $JAVA_HOME/bin/java, else the one on PATH, else /usr/bin/java. The
// error carries InstallHint.
func Java() (string, error) {
	if p := os.Getenv("LOCKLAB_JAVA"); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return "", fmt.Errorf("LOCKLAB_JAVA=%q is not a java binary: %s", p, InstallHint)
		}
		return p, nil
	}
	if h := os.Getenv("JAVA_HOME"); h != "" {
		if p := filepath.Join(h, "bin", "java"); isFile(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("java"); err == nil {
		return p, nil
	}
	if isFile("/usr/bin/java") {
		return "/usr/bin/java", nil
	}
	return "", errors.New("java not found (no JAVA_HOME, none on PATH): " + InstallHint)
}

// Installed reports whether ensembles can be started here: nil, or an
// error that says what is missing and how to install it.
func Installed() error {
	_, err := install()
	return err
}

// Version returns the version of the ZooKeeper that Binary names
// ("3.8.0"), or "unknown".
func Version() string {
	jar, err := Binary()
	if err != nil {
		return "unknown"
	}
	return versionOf(jar)
}

var versions sync.Map // jar path → version

// versionOf reads the version from the jar's Maven properties.
func versionOf(jar string) string {
	if v, ok := versions.Load(jar); ok {
		return v.(string)
	}
	v := "unknown"
	if b, err := readZipFile(jar, "META-INF/maven/org.apache.zookeeper/zookeeper/pom.properties"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if s, ok := strings.CutPrefix(strings.TrimSpace(l), "version="); ok && s != "" {
				v = s
			}
		}
	}
	versions.Store(jar, v)
	return v
}

// installation is what a server runs: java, the jar, and the class path.
type installation struct {
	java, jar, classpath string
	// jars are the files of the class path (the docker image copies them).
	jars []string
}

// install finds java and the jar, checks that the jar is ZooKeeper's
// server, and makes the class path: the jar (whose manifest names the
// jars it needs, as Debian's does), the jars beside it when its manifest
// names none (an upstream release's lib/), and slf4j's simple logger
// beside slf4j-api, which writes the log to stderr (Debian's jar brings
// no logger of its own).
func install() (installation, error) {
	jar, err := Binary()
	if err != nil {
		return installation{}, err
	}
	java, err := Java()
	if err != nil {
		return installation{}, err
	}
	if _, err := readZipFile(jar, "org/apache/zookeeper/server/quorum/QuorumPeerMain.class"); err != nil {
		return installation{}, fmt.Errorf("%s holds no ZooKeeper server (%v): %s", jar, err, InstallHint)
	}
	inst := installation{java: java, jar: jar, jars: []string{jar}}
	cp := []string{jar}
	deps := manifestClassPath(jar)
	if len(deps) == 0 {
		glob := filepath.Join(filepath.Dir(jar), "*")
		cp = append(cp, glob)
		more, _ := filepath.Glob(glob + ".jar")
		inst.jars = append(inst.jars, more...)
	}
	for _, d := range deps {
		if isFile(d) {
			inst.jars = append(inst.jars, d)
		}
	}
	for _, d := range deps {
		if filepath.Base(d) == "slf4j-api.jar" {
			if simple := filepath.Join(filepath.Dir(d), "slf4j-simple.jar"); isFile(simple) {
				cp = append(cp, simple)
				inst.jars = append(inst.jars, simple)
			}
		}
	}
	inst.classpath = strings.Join(cp, ":")
	return inst, nil
}

// manifestClassPath returns the Class-Path of jar's manifest, as absolute
// paths (relative ones are taken from the jar's directory).
func manifestClassPath(jar string) []string {
	b, err := readZipFile(jar, "META-INF/MANIFEST.MF")
	if err != nil {
		return nil
	}
	// A manifest's long lines go on in lines that start with a space.
	var value string
	in := false
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(string(b), "\r", "")))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case in && strings.HasPrefix(l, " "):
			value += l[1:]
		case strings.HasPrefix(l, "Class-Path:"):
			value, in = strings.TrimPrefix(l, "Class-Path:"), true
		default:
			in = false
		}
	}
	var out []string
	for _, p := range strings.Fields(value) {
		p = strings.TrimPrefix(p, "file:")
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(jar), p)
		}
		out = append(out, p)
	}
	return out
}

// readZipFile returns the contents of name in the zip file at path.
func readZipFile(path, name string) ([]byte, error) {
	z, err := zip.OpenReader(path)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	f, err := z.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
