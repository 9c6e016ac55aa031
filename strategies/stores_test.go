package strategies

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// registersStrategies reports whether the Go files (tests left out) of dir
// call this package's Register or MustRegister.
func registersStrategies(t *testing.T, dir string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	found := false
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		require.NoError(t, err)
		local := ""
		for _, imp := range file.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/locklab/locklab/strategies" {
				local = "strategies"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if ok && (sel.Sel.Name == "Register" || sel.Sel.Name == "MustRegister") {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == local {
					found = true
				}
			}
			return true
		})
	}
	return found
}

// TestEveryStorePackageIsKnown: every package under strategies/ that
// registers strategies itself (rather than through builtin.go) is one the
// registry knows the names of, and every package it knows exists and
// registers strategies. That each registers exactly the names listed is
// checked by that package's own tests (PackageNames).
func TestEveryStorePackageIsKnown(t *testing.T) {
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	var registering []string
	for _, e := range entries {
		if e.IsDir() && registersStrategies(t, e.Name()) {
			registering = append(registering, path.Join("github.com/locklab/locklab/strategies", e.Name()))
		}
	}
	assert.Equal(t, storePackages(), registering, "the packages under strategies/ that register strategies")
	for pkg, names := range storeStrategies {
		assert.True(t, slices.IsSorted(names), pkg)
		for _, n := range names {
			_, builtin := registry[n]
			assert.False(t, builtin, "%s is built in, and listed for %s", n, pkg)
			got, ok := Package(n)
			assert.True(t, ok)
			assert.Equal(t, pkg, got)
		}
	}
}
