// Package golist asks the go command about packages, for tests that check
// what a program links.
package golist

import (
	"os/exec"
	"strings"
	"testing"
)

// Deps lists the packages pkgs import, directly or not, as go list -deps
// does (tests excluded: what a program that imports pkgs links). It fails
// tb when the go command is missing or fails.
func Deps(tb testing.TB, pkgs ...string) []string {
	tb.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		tb.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	out, err := exec.Command(goBin, append([]string{"list", "-deps"}, pkgs...)...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		tb.Fatalf("go list -deps %v: %v\n%s", pkgs, err, ee.Stderr)
	}
	if err != nil {
		tb.Fatalf("go list -deps %v: %v", pkgs, err)
	}
	return strings.Fields(string(out))
}
