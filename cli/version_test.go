package cli

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestVersion: a report names locklab's build, whether the program is
// locklab's own binary or another module's that runs cli.Main.
func TestVersion(t *testing.T) {
	for _, c := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"released", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.2.0"}}, "v1.2.0"},
		{"a checkout", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}},
			"0123456789ab (modified)"},
		{"another module's program", debug.BuildInfo{Main: debug.Module{Path: "example.com/mylock", Version: "v0.3.0"},
			Deps: []*debug.Module{{Path: "github.com/spf13/cobra", Version: "v1.10.1"}, {Path: modulePath, Version: "v1.2.0"}}},
			"v1.2.0"},
		{"replaced by a directory", debug.BuildInfo{Main: debug.Module{Path: "example.com/mylock", Version: "(devel)"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v0.0.0", Replace: &debug.Module{Path: "../.."}}}},
			"v0.0.0 => ../.."},
	} {
		assert.Equal(t, c.want, version(&c.bi), c.name)
	}
}
