package locklab_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLayoutNamesEveryDirectory: docs/development.md's Layout draws the
// tree as it is: every directory of the module (and of the examples and
// the bench module beside it) is named there by its name, so that a
// directory added without its line, or one renamed, fails here. The
// directories .gitignore leaves out (bin/, make build's) are not the
// tree's.
func TestLayoutNamesEveryDirectory(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "## Layout\n\n```\n")
	tree, _, closed := strings.Cut(after, "```")
	if !ok || !closed {
		t.Fatal("docs/development.md has no Layout block")
	}
	ignored := map[string]bool{}
	if gi, err := os.ReadFile(".gitignore"); err == nil {
		for _, line := range strings.Fields(string(gi)) {
			if dir, ok := strings.CutPrefix(line, "/"); ok && strings.HasSuffix(dir, "/") {
				ignored[strings.TrimSuffix(dir, "/")] = true
			}
		}
	}
	dirs := 0
	err = filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == "." {
			return err
		}
		if ignored[path] || strings.HasPrefix(d.Name(), ".") && d.Name() != ".ci" {
			return filepath.SkipDir
		}
		dirs++
		named := regexp.MustCompile(`(^|[^\w.])` + regexp.QuoteMeta(d.Name()) + `($|[^\w])`)
		if !named.MatchString(tree) {
			t.Errorf("%s: docs/development.md's Layout does not name it", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if dirs < 50 {
		t.Fatalf("found only %d directories", dirs)
	}
}
