package zklock_test

import (
	"testing"

	"github.com/locklab/locklab/stores/zookeeper/zkproc/zktest"
)

// ensemble are the servers of the tests' shared ensemble, for the
// example, which cannot ask zktest for them: it has no testing.TB.
var ensemble []string

func TestMain(m *testing.M) {
	zktest.Prestart()
	// A benchmark's B asks for the example's servers, before the tests;
	// a failure to start leaves them empty, and each test that needs the
	// ensemble then fails with the reason.
	testing.Benchmark(func(b *testing.B) {
		if ensemble == nil {
			ensemble = zktest.Shared(b).Addrs()
		}
	})
	zktest.Main(m)
}

// servers are the client addresses of the ensemble the tests share.
func servers(t testing.TB) []string {
	t.Helper()
	return zktest.Shared(t).Addrs()
}
