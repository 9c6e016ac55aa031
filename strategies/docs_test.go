package strategies_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// packageDoc parses the documentation of the package in dir.
func packageDoc(t *testing.T, dir string) *doc.Package {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		require.NoError(t, err)
		files = append(files, f)
	}
	require.NotEmpty(t, files, dir)
	d, err := doc.NewFromFiles(fset, files, "example.com/"+files[0].Name.Name)
	require.NoError(t, err)
	return d
}

// nonZero is a value of type t that is not its zero value.
func nonZero(t *testing.T, typ reflect.Type) reflect.Value {
	t.Helper()
	v := reflect.New(typ).Elem()
	switch typ.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.String:
		v.SetString("x")
	case reflect.Slice:
		v = reflect.MakeSlice(typ, 1, 1)
	case reflect.Struct:
		for i := range typ.NumField() {
			if typ.Field(i).IsExported() {
				v.Field(i).Set(nonZero(t, typ.Field(i).Type))
			}
		}
	case reflect.Interface:
		for _, c := range []any{locklab.NewPool("127.0.0.1:1"), locklab.SystemClock, strings.NewReader(""), struct{}{}} {
			if reflect.TypeOf(c).AssignableTo(typ) {
				v.Set(reflect.ValueOf(c))
				return v
			}
		}
		t.Fatalf("no non-zero value of %v", typ)
	default:
		t.Fatalf("no non-zero value of %v: teach the test", typ)
	}
	return v
}

// optionFields are the fields of locklab.Config that only some strategies
// read: those that, set alone, make Config.Options name them.
func optionFields(t *testing.T) []string {
	var out []string
	typ := reflect.TypeFor[locklab.Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var cfg locklab.Config
		reflect.ValueOf(&cfg).Elem().Field(i).Set(nonZero(t, f.Type))
		switch opts := cfg.Options(); len(opts) {
		case 0:
		case 1:
			require.Equal(t, f.Name, opts[0], "Config.Options names the field it found set")
			out = append(out, f.Name)
		default:
			t.Fatalf("Config.%s alone makes Options %v", f.Name, opts)
		}
	}
	require.NotEmpty(t, out)
	return out
}

// TestDocsNameEveryOption: the documentation that lists the Config fields
// only some strategies read (New's refusal, Description.Options,
// Config.Options) names every one, in Config's order: the list is derived
// from the code here, so that it cannot drift from it.
func TestDocsNameEveryOption(t *testing.T) {
	opts := optionFields(t)
	t.Logf("option fields: %v", opts)
	list := func(text, after string) []string {
		t.Helper()
		m := regexp.MustCompile(regexp.QuoteMeta(after) + `\s*\(([^)]*)\)`).FindStringSubmatch(text)
		require.NotNil(t, m, "%q followed by a list in parentheses in:\n%s", after, text)
		return strings.Split(strings.Join(strings.Fields(m[1]), " "), ", ")
	}
	d := packageDoc(t, ".")
	var newDoc, descDoc string
	for _, f := range d.Funcs {
		if f.Name == "New" {
			newDoc = f.Doc
		}
	}
	for _, typ := range d.Types {
		if typ.Name != "Description" {
			continue
		}
		for _, spec := range typ.Decl.Specs {
			for _, f := range spec.(*ast.TypeSpec).Type.(*ast.StructType).Fields.List {
				if f.Names[0].Name == "Options" {
					descDoc = f.Doc.Text()
				}
			}
		}
	}
	assert.Equal(t, opts, list(newDoc, "the strategy does not read"), "go doc ./strategies New")
	prefixed := make([]string, len(opts))
	for i, o := range opts {
		prefixed[i] = "Opt" + o
	}
	assert.Equal(t, prefixed, list(descDoc, "meant for some strategies only"), "Description.Options")

	root := packageDoc(t, "..")
	var optionsDoc string
	for _, typ := range root.Types {
		for _, m := range typ.Methods {
			if typ.Name == "Config" && m.Name == "Options" {
				optionsDoc = m.Doc
			}
		}
	}
	assert.Equal(t, prefixed, list(optionsDoc, "c sets"), "locklab.Config.Options")
}

// closers are the strategies the package documentation's "Closing"
// section lists as opening something that locklab.Close ends.
func closers(t *testing.T) []string {
	t.Helper()
	text := packageDoc(t, ".").Doc
	_, section, ok := strings.Cut(text, "# Closing")
	require.True(t, ok, "the package documentation has a Closing section")
	var out []string
	for _, ln := range strings.Split(section, "\n") {
		item, ok := strings.CutPrefix(ln, "  - ")
		if !ok {
			continue
		}
		names, _, _ := strings.Cut(item, ":")
		out = append(out, strings.Split(names, ", ")...)
	}
	require.NotEmpty(t, out)
	return out
}

// TestClosingDocumented: the built-in strategies that the package
// documentation says open something are exactly those with a Close method,
// which locklab.Close calls; locklab.Close on the others returns nil.
func TestClosingDocumented(t *testing.T) {
	listed := closers(t)
	pool := locklab.NewPool("127.0.0.1:1") // never dialled
	defer pool.Close()
	for _, name := range strategies.Names() {
		d, err := strategies.Info(name)
		require.NoError(t, err)
		cfg := locklab.Config{Pool: pool}
		if d.Properties.MultiNode {
			cfg = locklab.Config{Nodes: []locklab.ConnSource{pool}}
		}
		l, err := strategies.New(name, cfg)
		require.NoError(t, err)
		_, isCloser := l.(io.Closer)
		assert.Equal(t, isCloser, slices.Contains(listed, name), "%s (%T): a Close method, and listed under Closing", name, l)
		assert.NoError(t, locklab.Close(l), name)
	}
	for _, n := range listed {
		_, registered := strategies.Info(n)
		_, other := strategies.Package(n)
		assert.True(t, registered == nil || other, "%s, listed under Closing, is a strategy", n)
	}
	assert.ErrorIs(t, locklab.Close(nil), locklab.ErrInvalid)
}
