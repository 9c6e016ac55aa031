package docgen_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/tools/docgen"
)

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading  = regexp.MustCompile(`^#{1,6}\s+(.*)$`)
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// anchors are the fragment names GitHub gives the headings of a Markdown
// file: lower case, punctuation dropped, spaces as hyphens, a repeated one
// numbered.
func anchors(src string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, ln := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(ln), "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(ln)
		if fenced || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestLinks: every relative link of README.md and docs/*.md names a file
// of the repository, and a #fragment a heading of the file it points to.
func TestLinks(t *testing.T) {
	const root = "../.."
	files, err := docgen.Files(root)
	require.NoError(t, err)
	links := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		fenced := false
		for i, ln := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(ln), "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(ln, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, frag, _ := strings.Cut(target, "#")
				dest := f
				if path != "" {
					dest = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
				}
				where := strings.TrimPrefix(f, root+"/") + ":" + strconv.Itoa(i+1)
				st, err := os.Stat(dest)
				if !assert.NoError(t, err, "%s: %s", where, target) {
					continue
				}
				if frag == "" || st.IsDir() || !strings.HasSuffix(dest, ".md") {
					continue
				}
				db, err := os.ReadFile(dest)
				require.NoError(t, err)
				assert.True(t, anchors(string(db))[frag], "%s: %s: no heading with that anchor in %s", where, target, dest)
			}
		}
	}
	require.NotZero(t, links)
	t.Logf("%d relative links in %d files", links, len(files))
}
