package memlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/harnesstest/memstore/memlock"
	"github.com/locklab/locklab/strategies"
)

// TestHarnessNamesTheStoreToImport: a program that imports the family's
// package and not its store's (harness/harnesstest/memstore, which this
// test binary does not link) has the strategies registered, but the
// harness refuses to run them, with the import the program lacks, which
// the strategies name (Description.StorePackage); the matrix's default
// strategies leave them out.
func TestHarnessNamesTheStoreToImport(t *testing.T) {
	if len(harness.Stores()) != 0 {
		t.Fatalf("registered stores %v: this test links none", harness.Stores())
	}
	if pkg, ok := strategies.StorePackage(memlock.Family); !ok || pkg != memlock.StorePackage {
		t.Errorf("StorePackage(%s) = %q, %v", memlock.Family, pkg, ok)
	}
	want := fmt.Sprintf("import _ %q", memlock.StorePackage)
	for _, name := range []string{memlock.CAS, memlock.Del} {
		if d, err := strategies.Info(name); err != nil || d.Family != memlock.Family {
			t.Fatalf("%s: %+v, %v: want it registered, of family %s", name, d, err, memlock.Family)
		}
		if _, err := harness.StrategyStore(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("StrategyStore(%s): %v, want an error with %s", name, err, want)
		}
		if _, err := harness.Resolve("pause-past-ttl", name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Resolve(pause-past-ttl, %s): %v, want an error with %s", name, err, want)
		}
		_, err := harness.Matrix(context.Background(), harness.MatrixOptions{Strategies: []string{name}, Scenarios: []string{"pause-past-ttl"}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Matrix on %s: %v, want an error with %s", name, err, want)
		}
		t.Logf("%s: %v", name, err)
	}
}
