// Package docgen keeps the generated parts of locklab's documentation in
// step with the code: every counterexample timeline, Mermaid diagram and the
// verdict matrix in docs/ come from real runs on real Redis servers.
//
// A Markdown file marks a generated region with a pair of HTML comments:
//
//	<!-- generated:run stale-recovery setnx-del -->
//	... replaced on every generation ...
//	<!-- end -->
//
// The opening comment holds a directive: a kind, positional arguments and
// optional key="value" options. The kinds are
//
//	run SCENARIO STRATEGY [schedule="..."]       Mermaid diagram, then text timeline
//	timeline SCENARIO STRATEGY [schedule="..."]  the text swimlane only
//	mermaid SCENARIO STRATEGY [schedule="..."]   the Mermaid sequence diagram only
//	matrix                                       the verdict matrix of every Redis strategy and scenario
//	matrix stores                                the matrix of the PostgreSQL, etcd and ZooKeeper strategies
//	matrix summary [stores]                      either matrix summed up row by row, in words
//	file PATH                                    a source file of the repository, fenced
//	scenario NAME                                the scenario's title, story, clients and property
//	example FUNC [file=PATH]                     the body of a Go function (default file: example_test.go)
//
// A run uses the scenario's own schedule, or the schedule option when given.
// When neither exists the shortest counterexample the explorer finds is
// used; the documentation pins those schedules in the marker instead, so
// that generation replays a fixed schedule. Everything generated is
// deterministic: tokens come from seeded sources, clocks are virtual, the
// explorer walks the same tree every time (so the matrix's schedule counts
// are written too), and nothing that varies between runs (elapsed times,
// ports) is written.
package docgen

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
	"github.com/locklab/locklab/stores"
)

// Marker texts.
const (
	openPrefix = "<!-- generated:"
	closeText  = "<!-- end -->"
)

// Matrix bounds used for the generated matrix: the harness defaults,
// written out so that the text can state them; and the bounds of the
// cells of the other stores, whose every step is a round trip to a
// database or a quorum of a cluster.
const (
	MatrixPreemptions = 2
	MatrixSchedules   = harness.MatrixSchedules
	StorePreemptions  = harness.StorePreemptions
	StoreSchedules    = harness.StoreSchedules
)

// Directive is the parsed content of an opening marker.
type Directive struct {
	Kind    string
	Args    []string
	Options map[string]string
	// Text is the marker's content as written.
	Text string
}

// String returns the directive as written in its marker.
func (d Directive) String() string { return d.Text }

// ParseDirective reads the text between "<!-- generated:" and "-->".
func ParseDirective(text string) (Directive, error) {
	d := Directive{Text: strings.TrimSpace(text), Options: map[string]string{}}
	s := d.Text
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			break
		}
		end := strings.IndexFunc(s, unicode.IsSpace)
		if eq := strings.IndexByte(s, '='); eq > 0 && (end < 0 || eq < end) {
			key := s[:eq]
			rest := s[eq+1:]
			var val string
			if strings.HasPrefix(rest, `"`) {
				q, err := strconv.QuotedPrefix(rest)
				if err != nil {
					return d, fmt.Errorf("directive %q: option %s: unterminated quote", d.Text, key)
				}
				val, _ = strconv.Unquote(q)
				rest = rest[len(q):]
			} else {
				e := strings.IndexFunc(rest, unicode.IsSpace)
				if e < 0 {
					e = len(rest)
				}
				val, rest = rest[:e], rest[e:]
			}
			d.Options[key] = val
			s = rest
			continue
		}
		if end < 0 {
			end = len(s)
		}
		tok := s[:end]
		if d.Kind == "" {
			d.Kind = tok
		} else {
			d.Args = append(d.Args, tok)
		}
		s = s[end:]
	}
	if d.Kind == "" {
		return d, fmt.Errorf("empty directive")
	}
	return d, nil
}

// Generator renders directives by running them on Nodes. The matrix is run
// at most once per Generator.
type Generator struct {
	// Nodes are the Redis servers: at least three for the multi-node
	// scenarios, the first with a replica for the failover scenario (see
	// StartNodes).
	Nodes []harness.Node
	// Stores are the nodes of the other stores, by store (StartStores):
	// the runs and matrix cells of their strategies run there.
	Stores map[string][]harness.Node
	// Root is the repository root, for file directives.
	Root string
	// Workers run each matrix cell's schedules on that many databases at
	// once (default harness.MatrixWorkers); Parallel cells explore at once
	// (default harness.MatrixParallel).
	Workers  int
	Parallel int
	// Keep, when set, names directives whose regions stay as they are:
	// Rewrite neither runs nor changes them.
	Keep func(Directive) bool
	// RedisMatrix runs the matrix on the Redis strategies alone, though
	// Stores are given for the pages' runs: the other stores' matrix
	// directives ("matrix stores", "matrix summary stores") must then be
	// kept, and rendering one is an error.
	RedisMatrix bool

	// Runs lists, in the order rendered, every run a page shows (run,
	// timeline and mermaid directives) with its verdict, so that a test can
	// hold each against its matrix cell.
	Runs []PageRun

	matrix *harness.MatrixResult
}

// PageRun is a run a page shows: its case, the schedule it replayed and
// the verdict it reached.
type PageRun struct {
	Scenario, Strategy, Schedule string
	Verdict                      harness.Verdict
}

// Block renders one directive: the text that goes between its markers,
// without the surrounding blank lines.
func (g *Generator) Block(ctx context.Context, d Directive) (string, error) {
	switch d.Kind {
	case "run", "timeline", "mermaid":
		if len(d.Args) != 2 {
			return "", fmt.Errorf("%s needs a scenario and a strategy: %q", d.Kind, d.Text)
		}
		h, err := g.run(ctx, d.Args[0], d.Args[1], d.Options["schedule"])
		if err != nil {
			return "", fmt.Errorf("%s: %w", d.Text, err)
		}
		g.Runs = append(g.Runs, PageRun{Scenario: d.Args[0], Strategy: d.Args[1], Schedule: h.Schedule, Verdict: h.Verdict})
		tl := "```text\n" + render.Timeline(h) + "```"
		mm := "```mermaid\n" + render.Mermaid(h) + "```"
		switch d.Kind {
		case "timeline":
			return tl, nil
		case "mermaid":
			return mm, nil
		}
		return mm + "\n\n" + tl, nil
	case "matrix":
		m, err := g.Matrix(ctx)
		if err != nil {
			return "", err
		}
		if g.RedisMatrix && slices.Contains(d.Args, "stores") {
			return "", fmt.Errorf("%s: the generator runs the matrix of Redis alone", d.Text)
		}
		redis := m.Only(func(st string) bool { return stores.Of(st) == "" })
		others := m.Only(func(st string) bool { return stores.Of(st) != "" })
		switch strings.Join(d.Args, " ") {
		case "":
			return render.MatrixMarkdown(redis, MatrixPreemptions, MatrixSchedules), nil
		case "stores":
			return render.StoresMarkdown(others, StorePreemptions, StoreSchedules), nil
		case "summary":
			return render.MatrixSummary(redis), nil
		case "summary stores":
			return render.MatrixSummary(others), nil
		}
		return "", fmt.Errorf("matrix takes no argument, \"stores\", \"summary\" or \"summary stores\": %q", d.Text)
	case "file":
		if len(d.Args) != 1 {
			return "", fmt.Errorf("file needs one path: %q", d.Text)
		}
		b, err := os.ReadFile(filepath.Join(g.Root, filepath.FromSlash(d.Args[0])))
		if err != nil {
			return "", err
		}
		lang := strings.TrimPrefix(filepath.Ext(d.Args[0]), ".")
		return fmt.Sprintf("```%s\n%s\n```\n<sub>%s</sub>", lang, strings.TrimRight(string(b), "\n"), d.Args[0]), nil
	case "example":
		if len(d.Args) != 1 {
			return "", fmt.Errorf("example needs one function name: %q", d.Text)
		}
		file := d.Options["file"]
		if file == "" {
			file = "example_test.go"
		}
		body, err := FuncBody(filepath.Join(g.Root, filepath.FromSlash(file)), d.Args[0])
		if err != nil {
			return "", err
		}
		return "```go\n" + body + "```", nil
	case "scenario":
		if len(d.Args) != 1 {
			return "", fmt.Errorf("scenario needs one name: %q", d.Text)
		}
		sc, err := harness.Lookup(d.Args[0])
		if err != nil {
			return "", err
		}
		return scenarioMarkdown(sc), nil
	}
	return "", fmt.Errorf("unknown directive kind %q in %q", d.Kind, d.Text)
}

// run replays a scenario on a strategy: the given schedule, else the
// scenario's own, else the shortest counterexample exploration finds.
func (g *Generator) run(ctx context.Context, scenario, strategy, schedule string) (*harness.History, error) {
	c, err := harness.Resolve(scenario, strategy)
	if err != nil {
		return nil, err
	}
	nodes := g.Nodes
	if st := stores.Of(strategy); st != "" {
		if nodes = g.Stores[st]; len(nodes) == 0 {
			return nil, fmt.Errorf("%s locks on %s: the generator has no such server", strategy, st)
		}
	}
	if schedule == "" && c.Scenario.Schedule == "" {
		res, err := harness.Demo(ctx, c, nodes)
		if err != nil {
			return nil, err
		}
		return res.History, nil
	}
	return harness.Run(ctx, harness.RunOptions{Case: c, Nodes: nodes, Schedule: schedule})
}

// Matrix runs the verdict matrix, once.
func (g *Generator) Matrix(ctx context.Context) (*harness.MatrixResult, error) {
	if g.matrix != nil {
		return g.matrix, nil
	}
	w := g.Workers
	if w <= 0 {
		w = harness.MatrixWorkers
	}
	par := g.Parallel
	if par <= 0 {
		par = harness.MatrixParallel
	}
	stores := g.Stores
	if g.RedisMatrix {
		stores = nil
	}
	m, err := harness.Matrix(ctx, harness.MatrixOptions{
		Nodes:            g.Nodes,
		MaxPreemptions:   MatrixPreemptions,
		MaxSchedules:     MatrixSchedules,
		Workers:          w,
		Parallel:         par,
		Naive:            true,
		Stores:           stores,
		StartFaultServer: faultServer,
		StorePreemptions: StorePreemptions,
		StoreSchedules:   StoreSchedules,
	})
	if err != nil {
		return nil, err
	}
	g.matrix = m
	return m, nil
}

// Region is a generated region of a file.
type Region struct {
	Directive Directive
	// Line is the 1-based line of the opening marker.
	Line int
	// start and end are byte offsets of the region's content: after the
	// opening marker's line, up to the closing marker's line.
	start, end int
}

// Regions finds the generated regions of src. Markers inside fenced code
// blocks are left alone.
func Regions(src []byte) ([]Region, error) {
	var out []Region
	lines := bytes.SplitAfter(src, []byte("\n"))
	off := 0
	var open *Region
	fenced := false // inside a fenced code block outside any region
	for i, ln := range lines {
		t := strings.TrimSpace(string(ln))
		switch {
		case open == nil && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")):
			fenced = !fenced
		case fenced:
			// markers quoted in a code block are examples, not markers
		case strings.HasPrefix(t, openPrefix):
			if open != nil {
				return nil, fmt.Errorf("line %d: marker opened before the one of line %d was closed", i+1, open.Line)
			}
			body, ok := strings.CutSuffix(t, "-->")
			if !ok {
				return nil, fmt.Errorf("line %d: a generated marker must fit on one line", i+1)
			}
			d, err := ParseDirective(strings.TrimPrefix(body, openPrefix))
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			open = &Region{Directive: d, Line: i + 1, start: off + len(ln)}
		case t == closeText && open != nil:
			open.end = off
			out = append(out, *open)
			open = nil
		}
		off += len(ln)
	}
	if open != nil {
		return nil, fmt.Errorf("line %d: generated marker without %s", open.Line, closeText)
	}
	return out, nil
}

// Rewrite returns src with every generated region rendered anew.
func (g *Generator) Rewrite(ctx context.Context, src []byte) ([]byte, error) {
	regions, err := Regions(src)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	last := 0
	for _, r := range regions {
		if g.Keep != nil && g.Keep(r.Directive) {
			continue // written out with the text up to the next region
		}
		block, err := g.Block(ctx, r.Directive)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", r.Line, err)
		}
		b.Write(src[last:r.start])
		neu := "\n" + strings.TrimRight(block, "\n") + "\n\n"
		if old := string(src[r.start:r.end]); old != neu && sameUpToZxids(old, neu) {
			neu = old
		}
		b.WriteString(neu)
		last = r.end
	}
	b.Write(src[last:])
	return b.Bytes(), nil
}

// zxid matches a ZooKeeper transaction id as timelines print it (a czxid
// shown as "@4294967366", a fence number): ten digits or more, since the
// epoch is the high 32 bits; or the start of one that a timeline's column
// cut short ("4294967366<42949673~"), six digits or more before the cut's
// mark. After an election the epoch, and so every digit, differs.
var zxid = regexp.MustCompile(`\b[0-9]{10,}\b|\b[0-9]{6,}~`)

// sameUpToZxids reports whether two renderings of a region differ only in
// ZooKeeper transaction ids. An ensemble counts every transaction, session
// openings among them, and go-zookeeper opens a new session by itself
// after one expires, at a moment the harness does not schedule (the
// expired client's reconnect races the other client's create). So a run
// replayed on the same schedule may number its nodes one higher; what the
// page shows (who acquired, which fence came first, the verdict) is the
// same, and the page keeps the numbers it has.
func sameUpToZxids(a, b string) bool {
	return zxid.ReplaceAllString(a, "Z") == zxid.ReplaceAllString(b, "Z")
}

// Files lists the Markdown files under root that generation maintains:
// docs/*.md and README.md.
func Files(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(docs)
	out := []string{}
	for _, f := range append(docs, filepath.Join(root, "README.md")) {
		if _, err := os.Stat(f); err == nil {
			out = append(out, f)
		}
	}
	return out, nil
}

// Change is a file whose generated regions differ from what the code
// produces now.
type Change struct {
	Path     string
	Old, New []byte
}

// Update renders every generated region of the Files under g.Root and
// returns the files that changed; with write, it also writes them.
func (g *Generator) Update(ctx context.Context, write bool) ([]Change, error) {
	files, err := Files(g.Root)
	if err != nil {
		return nil, err
	}
	// The runs go first, the matrix last: a run's fences (an etcd
	// revision, a ZooKeeper czxid, whose epoch counts the elections) depend
	// on what ran before it on the same servers, and the matrix runs
	// thousands of schedules there, leader elections among them.
	keep := g.Keep
	defer func() { g.Keep = keep }()
	kept := func(d Directive) bool { return keep != nil && keep(d) }
	olds := make([][]byte, len(files))
	neus := make([][]byte, len(files))
	for pass, later := range []func(Directive) bool{
		func(d Directive) bool { return d.Kind == "matrix" },
		func(d Directive) bool { return d.Kind != "matrix" },
	} {
		g.Keep = func(d Directive) bool { return later(d) || kept(d) }
		for i, f := range files {
			if pass == 0 {
				if olds[i], err = os.ReadFile(f); err != nil {
					return nil, err
				}
				neus[i] = olds[i]
			}
			if neus[i], err = g.Rewrite(ctx, neus[i]); err != nil {
				return nil, fmt.Errorf("%s:%w", f, err)
			}
		}
	}
	var out []Change
	for i, f := range files {
		old, neu := olds[i], neus[i]
		if bytes.Equal(old, neu) {
			continue
		}
		out = append(out, Change{Path: f, Old: old, New: neu})
		if write {
			if err := os.WriteFile(f, neu, 0o644); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// FirstDifference describes where a and b first differ, by line, for an
// error message.
func FirstDifference(a, b []byte) string {
	al := strings.Split(string(a), "\n")
	bl := strings.Split(string(b), "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y || i >= len(al) || i >= len(bl) {
			return fmt.Sprintf("line %d:\n  checked in: %q\n  generated:  %q", i+1, x, y)
		}
	}
	return "no difference"
}

// FuncBody returns the statements of the function name in the Go file
// path, as written, one tab of indentation less: what a page shows of a
// runnable example.
func FuncBody(path, name string) (string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return "", err
	}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Name.Name != name || fn.Recv != nil || fn.Body == nil {
			continue
		}
		from := fset.Position(fn.Body.Lbrace).Offset + 1
		to := fset.Position(fn.Body.Rbrace).Offset
		var b strings.Builder
		for _, ln := range strings.Split(strings.Trim(string(src[from:to]), "\n"), "\n") {
			b.WriteString(strings.TrimPrefix(ln, "\t") + "\n")
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("%s: no function %s", path, name)
}

func scenarioMarkdown(sc *harness.Scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "> **%s** — %s\n>\n> %s\n>\n> Checks: %s.", sc.Name, sc.Title, sc.Story, sc.Property)
	if sc.Schedule != "" {
		fmt.Fprintf(&b, " Schedule: `%s`.", sc.Schedule)
	}
	progs := make([]string, len(sc.Programs))
	for i, p := range sc.Programs {
		progs[i] = fmt.Sprintf("c%d: `%s`", i+1, p)
	}
	fmt.Fprintf(&b, "\n> Clients: %s.", strings.Join(progs, "; "))
	return b.String()
}
