package cli

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeCommands are the locklab command lines in README.md's code blocks,
// as the README shows them (a "$ " prompt and a trailing "# comment" cut).
func readmeCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	var out []string
	fenced := false
	for _, ln := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(ln)
		if strings.HasPrefix(t, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			continue
		}
		t = strings.TrimPrefix(t, "$ ")
		if !strings.HasPrefix(t, "locklab ") {
			continue
		}
		if i := strings.Index(t, " #"); i >= 0 {
			t = strings.TrimSpace(t[:i])
		}
		out = append(out, t)
	}
	return out
}

// TestREADMECommands runs every locklab command line of README.md, on
// redis-server processes where the command starts servers, and fails when
// one is refused or fails: the README shows only commands that work.
func TestREADMECommands(t *testing.T) {
	t.Parallel()
	lines := readmeCommands(t)
	require.NotEmpty(t, lines, "README.md shows locklab commands")
	schedule := regexp.MustCompile(`--schedule`)
	for _, line := range lines {
		t.Run(line, func(t *testing.T) {
			args := shellSplit(t, line)[1:]
			cmd, _, err := newRoot().Find(args)
			require.NoError(t, err, line)
			if cmd.Flags().Lookup("backend") != nil {
				args = append(args, "--backend", "process")
			}
			out, errOut, err := run(t, args...)
			require.NoError(t, err, "%s\n%s", errOut, out)
			require.NotEmpty(t, out)
			if schedule.MatchString(line) {
				require.Contains(t, out, "verdict:", "a schedule the README shows runs to a verdict")
			}
		})
	}
}

// TestREADMEACLRule: the ACL rule README.md and docs/addr.md give is the
// one the --addr tests run locklab under.
func TestREADMEACLRule(t *testing.T) {
	words := []string{"ACL", "SETUSER", "locklab", "on", ">PASSWORD"}
	for _, w := range minimalACL {
		words = append(words, w.(string))
	}
	want := strings.Join(words, " ")
	for _, f := range []string{"../README.md", "../docs/addr.md"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		rule := regexp.MustCompile(`(?m)^ACL SETUSER .*$`).FindString(string(b))
		require.Equal(t, want, rule, "%s gives the rule the tests use", f)
	}
}
