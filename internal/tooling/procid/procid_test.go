package procid

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHasRoom: a directory has room for a byte, none for an exabyte, and a
// missing one has none.
func TestHasRoom(t *testing.T) {
	dir := t.TempDir()
	assert.True(t, hasRoom(dir, 1))
	assert.False(t, hasRoom(dir, 1<<60), "an exabyte free")
	assert.False(t, hasRoom(dir+"/missing", 1))
}

// TestMkdirTempInShm: a directory MkdirTemp makes is in ShmDir where that
// has room, else in the temporary directory, and named for this process.
func TestMkdirTempInShm(t *testing.T) {
	dir, err := MkdirTemp("locklab-procid-test-")
	if !assert.NoError(t, err) {
		return
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	want := os.TempDir()
	if ShmUsable() {
		want = ShmDir
	}
	assert.DirExists(t, dir)
	assert.Regexp(t, "^"+want+"/locklab-procid-test-"+Tag(), dir)
}
