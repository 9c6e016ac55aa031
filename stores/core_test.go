package stores

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/strategies"
)

// TestCoreKnowsNoStore keeps the harness's core apart from the stores: the
// harness, its renderer and its checkers, stress mode, play and the fault
// vocabulary every store's nodes implement (harness/fault), import no
// store's client (pgx, etcd's client, gRPC, ZooKeeper's client) and no
// package of stores/, and their code names no registered store (Redis's
// "redis" among them) and no registered strategy (Redis's among them) in
// a string (names.in: a scenario's name, "redlock-pause", names none). What differs by store is asked of the store's harness.Driver
// (stress.StoreDriver in stress mode). A package the core depends on that
// imports one of stores/ is named: Redis's store and its servers
// (stores/redis/redisnode) too, which the core reaches through the
// registry (harness.MainStore) and stress mode through its StoreDriver,
// on the servers the caller gives (Options.Store). Stress mode is held to
// more (TestStressKnowsNoStore).
func TestCoreKnowsNoStore(t *testing.T) {
	core := []string{"../harness", "../harness/render", "../harness/stress", "../harness/play", "../harness/fault"}
	out, err := exec.Command("go", append([]string{"list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`}, core...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{"github.com/jackc/pgx", "go.etcd.io/etcd", "google.golang.org/grpc",
		"github.com/go-zookeeper/zk", "github.com/locklab/locklab/stores"}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 20 {
		t.Fatalf("go list -deps found %d packages: %v", len(lines), lines)
	}
	for _, line := range lines {
		imports := strings.Fields(line)
		p := imports[0]
		for _, f := range forbidden {
			if under(p, f) {
				t.Errorf("the harness's core depends on %s", p)
			}
		}
		for _, imp := range imports[1:] {
			if under(imp, "github.com/locklab/locklab/stores") {
				t.Errorf("%s imports %s: the core reaches a store through the registry", p, imp)
			}
		}
	}
	for _, f := range storeWords(t, append(core, "../harness/play/assets"), storeNames()) {
		t.Errorf("%s: ask its Driver instead", f)
	}
}

// under reports whether package p is pkg or a package under it.
func under(p, pkg string) bool { return p == pkg || strings.HasPrefix(p, pkg+"/") }

// TestCoreImportsNoRedigo: no file of the harness, its renderer, play,
// stress mode or the fault vocabulary imports redigo, Redis's client:
// Redis's store is stores/redis, whose StoreDriver runs stress mode on
// Redis's servers, and the run, its history and its checkers see a
// server's replies as values of their own (an error reply as
// harness.ErrorReply).
func TestCoreImportsNoRedigo(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range []string{"../harness", "../harness/render", "../harness/play", "../harness/fault", "../harness/stress", "../harness/stress/stresstest"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "github.com/gomodule/redigo") {
					t.Errorf("%s imports %s: Redis's client is stores/redis's", f, p)
				}
			}
		}
	}
}

// TestHarnessImportsNoServers: package harness starts no store's servers,
// Redis's included: it imports no package of stores/redis, whose
// redisnode starts Redis's servers, for the matrix (StartMatrixNodes) and
// play (its Driver's StartNodes), and runs on the nodes it is given or a
// store's Driver starts.
func TestHarnessImportsNoServers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "../harness").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := strings.Fields(string(out))
	if !slices.Contains(imports, "github.com/locklab/locklab/strategies") {
		t.Fatalf("go list found the imports %v", imports)
	}
	for _, p := range imports {
		if under(p, "github.com/locklab/locklab/stores/redis") {
			t.Errorf("harness imports %s", p)
		}
	}
}

// TestStressKnowsNoStore: stress mode has no store's code path. Every
// store, Redis included, runs there through the StoreDriver it registers,
// so no identifier and no string of harness/stress (tests aside) holds a
// registered store's name or title, or a word of Redis's servers
// (redisWords), whatever its case: a RedisCluster option, a "PTTL"
// command or a Sentinel group's check would be Redis's code in the core.
// Its comments may name a store, as an example.
func TestStressKnowsNoStore(t *testing.T) {
	for _, f := range codeWords(t, []string{"../harness/stress", "../harness/stress/stresstest"}, stressWords()) {
		t.Errorf("%s: the store's StoreDriver does that", f)
	}
}

// redisWords are words of Redis's servers and commands that no code of
// stress mode has a use for, store names aside.
var redisWords = []string{"sentinel", "redlock", "flushall", "pttl", "redigo", "acl"}

// stressWords are the words TestStressKnowsNoStore looks for, lower case,
// each once: the registered stores' names and titles, and redisWords.
func stressWords() []string {
	words := slices.Clone(redisWords)
	for _, d := range harness.Stores() {
		words = append(words, strings.ToLower(d.Name), strings.ToLower(d.Title))
	}
	slices.Sort(words)
	return slices.Compact(words)
}

// codeWords returns where the Go files of dirs (tests aside) hold one of
// words, lower case, in an identifier or a string literal, whatever its
// case.
func codeWords(t *testing.T, dirs, words []string) []string {
	t.Helper()
	var found []string
	fset := token.NewFileSet()
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(af, func(n ast.Node) bool {
				var s string
				switch n := n.(type) {
				case *ast.Ident:
					s = n.Name
				case *ast.BasicLit:
					if n.Kind == token.STRING {
						s, _ = strconv.Unquote(n.Value)
					}
				}
				for _, w := range words {
					if strings.Contains(strings.ToLower(s), w) {
						found = append(found, fmt.Sprintf("%s holds %q in %q", fset.Position(n.Pos()), w, s))
					}
				}
				return true
			})
		}
	}
	return found
}

// TestCodeWordsCatches: the check of TestStressKnowsNoStore finds a
// store's name in an identifier and Redis's words in a string, and
// nothing in a test file or a comment.
func TestCodeWordsCatches(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("planted.go", "package p\n\n// Redis in a comment is fine.\nvar RedisNodes = 1\n\nvar cmd = \"PTTL\"\n")
	write("planted_test.go", "package p\n\nvar s = \"a Sentinel group\"\n")
	found := codeWords(t, []string{dir}, stressWords())
	if len(found) != 2 || !strings.Contains(found[0], `"redis" in "RedisNodes"`) || !strings.Contains(found[1], `"pttl" in "PTTL"`) {
		t.Errorf("found %q; want the planted identifier and string, and nothing else", found)
	}
}

// names are what TestCoreKnowsNoStore looks for in the core's strings:
// the registered stores' names, the Main one's among them, and every
// registered strategy's, the Main store's too.
type names struct{ stores, strategies []string }

// storeNames are the names of the registered stores and strategies.
func storeNames() names {
	var n names
	for _, d := range harness.Stores() {
		n.stores = append(n.stores, d.Name)
	}
	for _, d := range strategies.All() {
		n.strategies = append(n.strategies, d.Name)
	}
	return n
}

// in returns the names string s names: a store's or a strategy's name
// that is all of s (a map's key, a value compared with), and a
// strategy's name that s holds as a whole word, between characters that
// are no letter, digit, '-' or '_' (a message that names it). A
// scenario's name holds no strategy's name as a whole word ("redlock-pause"
// is not "redlock"), and neither does a strategy's longer name
// ("set-nx-px-del" is not "set-nx-px"). A store's name in prose is not
// looked for: the catalog's stories and sources cite the stores'
// documentation ("etcd, v3lock API") and tell how a store guards a write.
func (n names) in(s string) []string {
	var out []string
	if slices.Contains(n.stores, s) {
		out = append(out, s)
	}
	for _, w := range n.strategies {
		if holdsWord(s, w) {
			out = append(out, w)
		}
	}
	return out
}

// holdsWord reports whether s holds w between characters that are no
// letter, digit, '-' or '_', or its ends.
func holdsWord(s, w string) bool {
	inWord := func(r rune) bool { return r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(w)
		before, _ := utf8.DecodeLastRuneInString(s[:start])
		after, _ := utf8.DecodeRuneInString(s[end:])
		if (start == 0 || !inWord(before)) && (end == len(s) || !inWord(after)) {
			return true
		}
		i = start + 1
	}
}

// storeWords returns where the Go files and scripts of dirs (tests aside)
// name one of n in a string (names.in).
func storeWords(t *testing.T, dirs []string, n names) []string {
	t.Helper()
	var found []string
	fset := token.NewFileSet()
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		scripts, _ := filepath.Glob(filepath.Join(dir, "*.js"))
		for _, f := range append(files, scripts...) {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			if strings.HasSuffix(f, ".js") {
				found = append(found, scriptWords(t, f, n)...)
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(af, func(node ast.Node) bool {
				if lit, ok := node.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					for _, w := range n.in(s) {
						found = append(found, fmt.Sprintf("%s names %q", fset.Position(lit.Pos()), w))
					}
				}
				return true
			})
		}
	}
	return found
}

// jsString is a string literal of a script, quoted either way.
var jsString = regexp.MustCompile(`"([^"\\\n]*)"|'([^'\\\n]*)'`)

// scriptWords is storeWords for a script of play's page: its string
// literals that name one of n.
func scriptWords(t *testing.T, file string, n names) []string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for i, line := range strings.Split(string(src), "\n") {
		for _, m := range jsString.FindAllStringSubmatch(line, -1) {
			for _, w := range n.in(m[1] + m[2]) {
				found = append(found, fmt.Sprintf("%s:%d names %q", file, i+1, w))
			}
		}
	}
	return found
}

// TestStoreWordsCatches: the check of TestCoreKnowsNoStore finds a store's
// name and a strategy's name planted in a file, the Main store's and its
// strategies' too, a strategy's name in a message, and nothing in a test
// file or a comment, in a scenario's name, in a longer strategy's name or
// in prose that names a store.
func TestStoreWordsCatches(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("planted.go", "package p\n\n// zookeeper in a comment is fine.\nvar a, b = \"zookeeper\", \"pg-advisory\"\n")
	write("planted_main.go", "package p\n\n// set-nx-px in a comment is fine.\n"+
		"var known = map[string][]string{\"set-nx-px\": {\"c1 c2\"}}\n"+
		"var msg = \"multi-node scenarios are for redlock, the others for single-node strategies\"\n"+
		"var store = \"redis\"\n"+
		"var fine = []string{\"redlock-pause\", \"set-nx-px-getdel-ish\", \"Redlock's masters\", \"on etcd a Txn\", \"Redis locks page\"}\n")
	write("planted_test.go", "package p\n\nvar c = \"etcd-lease\"\n")
	write("planted.js", "// postgres in a comment is fine.\nif (l.store === 'etcd') return \"x\";\n")
	found := storeWords(t, []string{dir}, storeNames())
	want := []string{`planted.go:4:12 names "zookeeper"`, `planted.go:4:25 names "pg-advisory"`,
		`planted_main.go:4:33 names "set-nx-px"`, `planted_main.go:5:11 names "redlock"`, `planted_main.go:6:13 names "redis"`,
		`planted.js:2 names "etcd"`}
	if len(found) != len(want) {
		t.Fatalf("found %q; want the planted store and strategy names (%q), and nothing else", found, want)
	}
	for i, w := range want {
		if !strings.HasSuffix(found[i], w) {
			t.Errorf("found %q; want it to end with %q", found[i], w)
		}
	}
}
