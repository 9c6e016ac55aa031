package zkproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClassDataArchive dumps the servers' archive into an empty cache
// directory and maps it into a java run with the servers' flags, with
// sharing required, as java refuses an archive dumped from another class
// path.
func TestClassDataArchive(t *testing.T) {
	inst, err := install()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	a := archiveIn(dir, inst)
	assert.Nil(t, a.flagsNow(), "an archive not yet dumped is not mapped")
	require.NoError(t, a.dump(inst))
	require.Equal(t, []string{"-XX:SharedArchiveFile=" + a.path}, a.flagsNow())
	left, err := filepath.Glob(filepath.Join(filepath.Dir(a.path), "dump-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "the dump's own files are removed")

	args := append(append([]string{}, jvmFlags...), "-Xshare:on", "-XX:SharedArchiveFile="+a.path, "-cp", inst.classpath, "-version")
	out, err := exec.Command(inst.java, args...).CombinedOutput()
	require.NoError(t, err, "java maps the archive: %s", out)
	assert.Contains(t, string(out), "sharing")

	// The same with a class path the archive was not dumped from.
	other := slices.Clone(args)
	other[len(other)-2] = t.TempDir() + string(os.PathListSeparator) + inst.classpath
	out, err = exec.Command(inst.java, other...).CombinedOutput()
	assert.Error(t, err, "java on another class path refuses the archive (%s): the check above can fail", strings.TrimSpace(string(out)))

	// Another installation (another class path) dumps an archive of its own.
	b := archiveIn(dir, installation{java: inst.java, jars: inst.jars, classpath: inst.classpath + string(os.PathListSeparator) + t.TempDir()})
	assert.NotEqual(t, a.path, b.path)
}
