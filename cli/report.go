package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
)

func newReportCmd(g *globals) *cobra.Command {
	var (
		o     harness.MatrixOptions
		out   string
		title string
		nodes int
	)
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Run the verdict matrix and write it as a self-contained HTML page",
		Long: `report runs the verdict matrix like "locklab matrix" and writes one HTML
file that needs no network to view: the matrix coloured by outcome, and
behind each cell the scenario's story and source, the verdict, the shortest
counterexample schedule, its timeline, a sequence diagram, the Mermaid
source and the JSON history.`,
		Example: `  locklab report
  locklab report -o matrix.html --strategy setnx-del,set-nx-px --max-schedules 500
  locklab report --backend process --scenario stale-recovery,release-after-expiry`,
		Args: usageArgs(0, 0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := g.checkMatrix(cmd, &o); err != nil {
				return err
			}
			if err := checkOut(out); err != nil {
				return g.args.badFlag(cmd, "out", out, "%v", err)
			}
			mr, err := g.runMatrix(cmd, &o, nodes)
			if err != nil {
				return err
			}
			c, m, began := mr.cluster, mr.result, mr.began
			defer closeAndTell(cmd.ErrOrStderr(), mr)
			if err := mr.audit.err(o.Strategies); err != nil {
				return err // no report of verdicts that do not cover the lock's own client
			}
			// Replay each counterexample with the key's value recorded.
			if _, err := harness.Record(ctx, m, o.Nodes); err != nil {
				return err
			}
			meta := render.Meta{
				Title:            title,
				Redis:            c.Describe(),
				Backend:          c.Backend(),
				Generated:        began,
				Command:          "locklab " + strings.Join(g.commandLine(), " "),
				Version:          buildVersion(),
				MaxPreemptions:   o.MaxPreemptions,
				MaxSchedules:     o.MaxSchedules,
				Workers:          o.Workers,
				StorePreemptions: o.StorePreemptions,
				StoreSchedules:   o.StoreSchedules,
				Servers:          mr.said,
			}
			for _, n := range o.Nodes {
				meta.Nodes = append(meta.Nodes, n.Name()+" "+n.Addr())
			}
			path, err := writeReport(out, m, meta)
			if err != nil {
				return fmt.Errorf("writing the report to %s: %w", out, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report written to %s (%d cells, %d failing)\n", path, len(m.Cells), m.Violations())
			return noCellRan(m)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "out", "o", "locklab-report.html", "the HTML file to write (its directory must exist)")
	f.StringVar(&title, "title", "", `the page's title (default "locklab verdict matrix")`)
	matrixFlags(f, &o, &nodes)
	return serverCmd(cmd)
}

// checkOut checks, before the matrix runs, that the report can be written
// to path: it names a file, not a directory, in a directory that exists
// and takes a new file.
func checkOut(path string) error {
	if path == "" {
		return errors.New("must name the HTML file to write")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return errors.New("is a directory; name the HTML file to write in it")
	}
	dir := filepath.Dir(abs)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", dir)
	case err != nil:
		return fmt.Errorf("directory %s: %w", dir, unwrapPath(err))
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	tmp, err := os.CreateTemp(dir, ".locklab-report-*.html")
	if err != nil {
		return fmt.Errorf("cannot write in directory %s: %w", dir, unwrapPath(err))
	}
	tmp.Close()
	return os.Remove(tmp.Name())
}

// unwrapPath is the error of a file operation without the path (a
// temporary file's, which the user never named).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// writeReport writes the page next to path and renames it into place, so
// that an interrupted run leaves no half-written file. It returns the
// absolute path.
func writeReport(path string, m *harness.MatrixResult, meta render.Meta) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(abs), ".locklab-report-*.html")
	if err != nil {
		return "", unwrapPath(err)
	}
	defer os.Remove(tmp.Name())
	if err := render.HTML(tmp, m, meta); err != nil {
		tmp.Close()
		return "", unwrapPath(err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", unwrapPath(err)
	}
	if err := tmp.Close(); err != nil {
		return "", unwrapPath(err)
	}
	if err := os.Rename(tmp.Name(), abs); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			return "", le.Err
		}
		return "", err
	}
	return abs, nil
}

// buildVersion names the build of locklab this program runs (version).
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return version(bi)
}

// modulePath is locklab's module.
const modulePath = "github.com/locklab/locklab"

// version is locklab's version in the build bi: the main module's version
// or VCS revision when the program is locklab's own, else the version of
// the locklab module the program requires ("v1.2.0", or "v0.0.0 => ../.."
// where a replace directive points it elsewhere).
func version(bi *debug.BuildInfo) string {
	if bi.Main.Path != modulePath && bi.Main.Path != "" {
		for _, d := range bi.Deps {
			if d.Path != modulePath {
				continue
			}
			if r := d.Replace; r != nil {
				return strings.TrimSpace(d.Version + " => " + r.Path + " " + r.Version)
			}
			return d.Version
		}
	}
	v := bi.Main.Version
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && (v == "" || v == "(devel)") {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += " (modified)"
		}
		return rev
	}
	return v
}
