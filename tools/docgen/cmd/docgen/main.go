// Command docgen regenerates the generated regions of locklab's Markdown
// documentation (docs/*.md and README.md): counterexample timelines, Mermaid
// diagrams and the verdict matrix, from real runs on redis-server processes
// it starts on loopback ports. `make docs` runs it.
//
//	go run ./tools/docgen/cmd/docgen           rewrite the files
//	go run ./tools/docgen/cmd/docgen -check    exit 1 when a file is out of date
//	go run ./tools/docgen/cmd/docgen -redis-matrix
//	                                          rewrite them, with the Redis strategies' matrix alone (seconds,
//	                                          as the full docs test replays it); the other stores' matrix
//	                                          regions are left as they are
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/locklab/locklab/tools/docgen"
)

func main() {
	root := flag.String("root", ".", "repository root (holds README.md and docs/)")
	check := flag.Bool("check", false, "write nothing; exit 1 when a file differs from what the code produces")
	keepMatrix := flag.Bool("keep-matrix", false, "leave the matrix regions as they are (the long part), regenerate the others")
	redisMatrix := flag.Bool("redis-matrix", false, "run the matrix of the Redis strategies alone: regenerate its regions and the "+
		"others, leave the other stores' matrix regions as they are")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *keepMatrix && *redisMatrix {
		fmt.Fprintln(os.Stderr, "docgen: -keep-matrix and -redis-matrix exclude each other")
		os.Exit(2)
	}
	if err := run(ctx, *root, *check, *keepMatrix, *redisMatrix); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root string, check, keepMatrix, redisMatrix bool) error {
	nodes, closeNodes, err := docgen.StartNodes(ctx)
	if err != nil {
		return err
	}
	defer closeNodes()
	others, closeOthers, err := docgen.StartStores(ctx)
	if err != nil {
		return err
	}
	defer closeOthers()
	g := &docgen.Generator{Nodes: nodes, Stores: others, Root: root}
	switch {
	case keepMatrix:
		g.Keep = func(d docgen.Directive) bool { return d.Kind == "matrix" }
	case redisMatrix:
		g.RedisMatrix = true
		g.Keep = func(d docgen.Directive) bool { return d.Kind == "matrix" && slices.Contains(d.Args, "stores") }
	}
	changes, err := g.Update(ctx, !check)
	if err != nil {
		return err
	}
	for _, c := range changes {
		rel, _ := filepath.Rel(root, c.Path)
		if check {
			fmt.Printf("out of date: %s (%s)\n", rel, docgen.FirstDifference(c.Old, c.New))
		} else {
			fmt.Printf("updated %s\n", rel)
		}
	}
	if check && len(changes) > 0 {
		return fmt.Errorf("%d file(s) out of date: run make docs", len(changes))
	}
	if len(changes) == 0 {
		fmt.Println("docs up to date")
	}
	return nil
}
