package locklab_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayering keeps the library apart from the tooling: no package a
// service imports (the root, lockkit, strategies and its families, the
// adapters, and the internal packages they use; and the test store's
// family, memlock) imports, outside its tests,
// a package of internal/tooling (the helpers of the harness, the CLI and
// the tests), of tools (the docs generator), of adapters/internal (the
// adapters' tests' harness), of stores (each store's servers and its side
// of the harness) or of the harness.
// A library package that did would pull the harness's dependencies into
// every service that locks.
func TestLayering(t *testing.T) {
	const mod = "github.com/locklab/locklab/"
	tooling := []string{mod + "internal/tooling", mod + "tools", mod + "adapters/internal", mod + "stores", mod + "harness"}
	var library []string
	// memlock, the family of the store made for the tests, is held to
	// what a family under strategies/ is, as docs/development.md's
	// "Adding a store" takes it for one.
	memlock := filepath.Join("harness", "harnesstest", "memstore", "memlock")
	for _, root := range []string{".", "lockkit", "strategies", "adapters", "internal", memlock} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if path == filepath.Join("internal", "tooling") || path == filepath.Join("adapters", "internal") ||
				strings.HasPrefix(d.Name(), ".") ||
				d.Name() == "testdata" || (root == "." && path != ".") {
				return filepath.SkipDir
			}
			library = append(library, path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(library) < 10 {
		t.Fatalf("found only %d library directories: %v", len(library), library)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, dir := range library {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			for _, imp := range af.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, tp := range tooling {
					if p == tp || strings.HasPrefix(p, tp+"/") {
						t.Errorf("%s imports %s: the library must not depend on the tooling", f, p)
					}
				}
			}
		}
	}
	t.Logf("%d files in %d library directories", checked, len(library))
}
