// The verdict matrix as one self-contained HTML page (HTML):
// the matrix as a table (a row per strategy, a column per scenario, each
// cell coloured and labelled by its outcome) and, behind each cell, what
// the harness found: the scenario's story and source, the verdict, the
// shortest counterexample schedule, its text timeline, a sequence diagram
// drawn as inline SVG, the Mermaid source and the JSON history.
//
// The page needs no network when it is viewed: its CSS and script are
// inlined, and nothing is loaded from elsewhere. Without script, each cell
// still links to its details.

package render

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/locklab/locklab/harness"
)

//go:embed assets/report.html.tmpl assets/report.css assets/report.js
var assets embed.FS

// Meta says what produced the matrix: shown in the page's header.
type Meta struct {
	// Title heads the page (default "locklab verdict matrix").
	Title string
	// Redis says which Redis answered, e.g. "process /usr/bin/redis-server
	// (Redis 7.0.15)" (redisnode.Cluster.Describe).
	Redis string
	// Backend is the node backend: docker, process or addrs.
	Backend string
	// Nodes are the servers, e.g. "n1 127.0.0.1:40123".
	Nodes []string
	// Generated is when the matrix ran (default: now).
	Generated time.Time
	// Command is the command line that produced the report.
	Command string
	// Version is the locklab build (module version or VCS revision).
	Version string
	// Servers describe the other stores' servers, one line each, as
	// "PostgreSQL: process 127.0.0.1:5432 (...)": the text before the
	// first colon names the store.
	Servers []string
	// MaxPreemptions, MaxSchedules and Workers are the matrix's bounds as
	// given (0: the harness's default; a negative MaxPreemptions: none);
	// StorePreemptions and StoreSchedules those of the other stores'
	// cells.
	MaxPreemptions   int
	MaxSchedules     int
	Workers          int
	StorePreemptions int
	StoreSchedules   int
}

// server is a line of Meta.Servers split at its first colon.
type server struct{ Store, Desc string }

// outcomeInfo is how an outcome looks in the page.
type outcomeInfo struct {
	Outcome harness.Outcome
	Class   string
	Label   string
	Mark    string
	Meaning string
}

var outcomes = []outcomeInfo{
	{harness.Safe, "safe", "SAFE", "✓", "no violation in any schedule within the bound (* the schedule limit was reached before the bound was explored in full)"},
	{harness.Violated, "violated", "VIOLATED", "✗", "mutual exclusion, release safety or fencing broken: the shortest counterexample is shown"},
	{harness.Deadlock, "deadlock", "DEADLOCK", "■", "after every holder crashed and the TTL passed, no client could acquire"},
	{harness.Starvation, "starvation", "STARVATION", "◷", "a client kept trying while the lock was free for the taking and never got it"},
	{harness.NA, "na", "n/a", "–", "the scenario is not meant for this strategy, or the nodes cannot inject its faults"},
	{harness.Error, "error", "ERROR", "!", "the run itself failed (see the message)"},
}

func infoOf(o harness.Outcome) outcomeInfo {
	for _, i := range outcomes {
		if i.Outcome == o {
			return i
		}
	}
	return outcomeInfo{Outcome: o, Class: "error", Label: string(o), Mark: "?", Meaning: "unknown outcome"}
}

// page is what the template renders.
type page struct {
	Meta      Meta
	Generated string
	Elapsed   string
	Bounds    string
	Legend    []legendItem
	Scenarios []scenarioHead
	Rows      []row
	Details   []detail
	Cells     int
	Failures  int
	Schedules int
	// On names the stores the cells ran on ("Redis, PostgreSQL and
	// etcd"); OnMain is set when a strategy of the Main store
	// (harness.Driver.Main), whose servers are the nodes the matrix was
	// given, is among them.
	On      string
	OnMain  bool
	Servers []server
	CSS     template.CSS
	JS      template.JS
	Data    template.JS
}

type legendItem struct {
	outcomeInfo
	Count int
}

type scenarioHead struct {
	Name, Title string
	Num         int
}

type row struct {
	Strategy string
	// Setting is how the harness runs it where that is not its default.
	Setting string
	Cells   []cellView
}

type cellView struct {
	ID        string
	Strategy  string
	Scenario  string
	Info      outcomeInfo
	Partial   bool
	Tip       string
	Missing   bool
	Schedules int
}

type detail struct {
	cellView
	Sc         *harness.ScenarioAbout
	Property   string
	Message    string
	Summary    string
	Schedule   string
	Full       string
	Timeline   string
	Labels     string
	Mermaid    string
	JSON       string
	Sequence   template.HTML
	HasHistory bool
}

// HTML renders m as a self-contained HTML page on w.
func HTML(w io.Writer, m *harness.MatrixResult, meta Meta) error {
	if m == nil {
		return fmt.Errorf("report: no matrix")
	}
	css, err := assets.ReadFile("assets/report.css")
	if err != nil {
		return err
	}
	js, err := assets.ReadFile("assets/report.js")
	if err != nil {
		return err
	}
	tmpl, err := template.New("report.html.tmpl").ParseFS(assets, "assets/report.html.tmpl")
	if err != nil {
		return err
	}
	if meta.Title == "" {
		meta.Title = "locklab verdict matrix"
	}
	if meta.Generated.IsZero() {
		meta.Generated = time.Now()
	}
	p := page{
		Meta:      meta,
		Generated: meta.Generated.Format("2006-01-02 15:04:05 MST"),
		Elapsed:   m.Elapsed.Round(time.Millisecond).String(),
		CSS:       template.CSS(css),
		JS:        template.JS(js),
	}
	var on, others []string
	for _, d := range harness.Stores() {
		if slices.ContainsFunc(m.Strategies, func(s string) bool { return harness.StoreOfStrategy(s) == d.Name }) {
			on = append(on, d.Title)
			p.OnMain = p.OnMain || d.Main
			if !d.Main {
				others = append(others, d.Name)
			}
		}
	}
	p.On = joinAnd(on)
	if p.On == "" {
		p.On = "real servers"
	}
	p.Bounds = bounds(meta, p.OnMain, others)
	for _, line := range meta.Servers {
		name, desc, _ := strings.Cut(line, ": ")
		p.Servers = append(p.Servers, server{name, desc})
	}
	count := map[harness.Outcome]int{}
	for i, sc := range m.Scenarios {
		h := scenarioHead{Name: sc, Num: i + 1}
		h.Title = rowTitle(m, sc)
		p.Scenarios = append(p.Scenarios, h)
	}
	for _, st := range m.Strategies {
		r := row{Strategy: st, Setting: harness.RunSetting(st)}
		for _, sc := range m.Scenarios {
			c, ok := m.Cell(st, sc)
			v := cellView{ID: cellID(st, sc), Strategy: st, Scenario: sc}
			if !ok {
				v.Missing = true
				v.Info = outcomeInfo{Class: "missing", Label: "?", Mark: "?"}
				v.Tip = "not run"
				r.Cells = append(r.Cells, v)
				continue
			}
			v.Info = infoOf(c.Outcome)
			v.Partial = c.Outcome == harness.Safe && !c.Complete
			v.Schedules = c.Schedules
			v.Tip = fmt.Sprintf("%s × %s: %s", st, sc, c.Outcome)
			if c.Message != "" {
				v.Tip += " — " + c.Message
			}
			count[c.Outcome]++
			p.Cells++
			p.Schedules += c.Schedules
			if (harness.Verdict{Outcome: c.Outcome}).Failed() {
				p.Failures++
			}
			r.Cells = append(r.Cells, v)
			d, err := newDetail(m, v, c)
			if err != nil {
				return err
			}
			p.Details = append(p.Details, d)
		}
		p.Rows = append(p.Rows, r)
	}
	for _, i := range outcomes {
		if i.Outcome == harness.Error && count[i.Outcome] == 0 {
			continue
		}
		p.Legend = append(p.Legend, legendItem{outcomeInfo: i, Count: count[i.Outcome]})
	}
	data, err := json.Marshal(struct {
		Meta   Meta                  `json:"meta"`
		Matrix *harness.MatrixResult `json:"matrix"`
	}{meta, m})
	if err != nil {
		return err
	}
	// Inside <script type="application/json">, "</" must not appear.
	p.Data = template.JS(strings.ReplaceAll(string(data), "</", `<\/`))
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, p); err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

func newDetail(m *harness.MatrixResult, v cellView, c harness.Cell) (detail, error) {
	d := detail{cellView: v, Property: string(c.Property), Message: c.Message, Schedule: c.Schedule}
	if s, ok := m.Scenario(c.Scenario); ok {
		s = s.For(c.Strategy) // the story of the store the cell ran on
		d.Sc = &s
		if d.Property == "" {
			d.Property = string(s.Property)
		}
	}
	switch c.Outcome {
	case harness.Safe:
		bound := "every schedule within the bound explored"
		switch {
		case !c.Complete && c.Limit > 0:
			bound = fmt.Sprintf("the cell's limit of %d schedules for its search was reached before the bound was explored in full", c.Limit)
		case !c.Complete:
			bound = "the schedule limit was reached before the bound was explored in full"
		}
		d.Summary = fmt.Sprintf("no violation within the bound, %s (%s)", plural(c.Schedules, "schedule"), bound)
	case harness.NA:
		d.Summary = "not applicable"
		if c.Message != "" {
			d.Summary += ": " + c.Message
		}
	default:
		d.Summary = fmt.Sprintf("%s after %s", c.Outcome, plural(c.Schedules, "schedule"))
		if c.Message != "" {
			d.Summary += ": " + c.Message
		}
	}
	if h := c.Counterexample; h != nil {
		j, err := h.JSON()
		if err != nil {
			return d, fmt.Errorf("report: %s × %s: %w", c.Strategy, c.Scenario, err)
		}
		d.HasHistory = true
		d.JSON = string(j)
		d.Timeline = Timeline(h)
		d.Labels = Abbreviations(c.Strategy)
		d.Mermaid = Mermaid(h)
		d.Full = h.Schedule
		d.Sequence = sequenceSVG(h, v.ID)
	}
	return d, nil
}

// bounds says the bounds of the cells: the matrix's, which the Main
// store's cells take, when onMain, and those of the other stores that ran.
func bounds(m Meta, onMain bool, others []string) string {
	def := func(v, d int) string {
		switch {
		case v == 0:
			return fmt.Sprintf("%d (default)", d)
		case v < 0:
			return "0"
		}
		return fmt.Sprint(v)
	}
	var parts []string
	if onMain {
		parts = append(parts, fmt.Sprintf("at most %s preemptions and %s schedules per cell, %s workers",
			def(m.MaxPreemptions, 2), def(m.MaxSchedules, harness.MatrixSchedules), def(m.Workers, 1)))
	}
	if len(others) > 0 {
		limits := []string{fmt.Sprint(harness.StoreRestartSchedules)}
		for _, l := range harness.StoreLimits(others...) {
			limits = append(limits, fmt.Sprintf("%d %s", l.Schedules, l.Where))
		}
		parts = append(parts, fmt.Sprintf("on %s at most %s preemptions and %s schedules per cell, "+
			"fewer where a server restarts or fails over (%s): a safe* cell says which limit stopped it",
			joinAnd(harness.StoreTitles(others...)), def(m.StorePreemptions, harness.StorePreemptions), def(m.StoreSchedules, harness.StoreSchedules),
			strings.Join(limits, ", ")))
	}
	return strings.Join(parts, "; ")
}

// joinAnd joins "a", "b" and "c" as "a, b and c".
func joinAnd(xs []string) string {
	if len(xs) <= 1 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// cellID is the element id of a cell's details.
func cellID(strategy, scenario string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
				return r
			}
			return '_'
		}, s)
	}
	return "cell--" + clean(strategy) + "--" + clean(scenario)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
