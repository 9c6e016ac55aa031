package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/redistest"
)

// schemaDir holds one JSON Schema per --json output.
const schemaDir = "../docs/schemas"

// compileSchemas compiles every schema of docs/schemas, by the command
// whose output it describes ("demo" for demo.schema.json).
func compileSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(schemaDir, "*.schema.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Each schema is known by its $id, which the others' $refs resolve
	// against.
	ids := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		doc := parseJSON(t, string(b))
		id, _ := doc.(map[string]any)["$id"].(string)
		require.NotEmpty(t, id, "%s has an $id", f)
		require.NoError(t, c.AddResource(id, doc), f)
		ids[strings.TrimSuffix(filepath.Base(f), ".schema.json")] = id
	}
	out := map[string]*jsonschema.Schema{}
	for name, id := range ids {
		sch, err := c.Compile(id)
		require.NoError(t, err, id)
		out[name] = sch
	}
	return out
}

func parseJSON(t *testing.T, text string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	require.NoError(t, err, text)
	return v
}

// snakeKey is the spelling of every key of every --json output.
var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// keys lists the object keys of v at any depth, but those of a map whose
// keys are data (check's settings, named as the server names them).
func keys(v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out[k] = true
			if k != "settings" {
				keys(e, out)
			}
		}
	case []any:
		for _, e := range x {
			keys(e, out)
		}
	}
}

// jsonRuns are the --json command lines the test runs, by the schema their
// output follows: each small enough for -short, and each a run on real
// Redis where the command needs one.
func jsonRuns(checkAddr string) map[string][][]string {
	return map[string][][]string{
		"list":      {{"list", "--json"}},
		"scenarios": {{"scenarios", "--json"}},
		"demo": {
			{"demo", "stale-recovery", "--backend", "process", "-s", "setnx-del,setnx-getset", "--json"},
			{"demo", "release-after-expiry", "--backend", "process", "-s", "set-nx-px", "--json"},
		},
		"explore": {
			{"explore", "--backend", "process", "-s", "setnx-del", "-x", "stale-recovery", "--first", "--json"},
			{"explore", "--backend", "process", "-s", "set-nx-px", "-x", "stale-recovery", "--max-schedules", "5", "--json"},
		},
		"matrix": {
			{"matrix", "--backend", "process", "--nodes", "1", "-s", "setnx-del,set-nx-px", "-x", "stale-recovery,release-after-expiry", "--json"},
			{"matrix", "--backend", "process", "--nodes", "1", "-s", "setnx-del,set-nx-px", "-x", "stale-recovery,release-after-expiry", "--shard", "2/3", "--json"},
		},
		"stress": {
			{"stress", "--backend", "process", "-s", "setnx-del", "--first", "--cycles", "100", "--duration", "2m", "--json"},
			{"stress", "--backend", "process", "-s", "set-nx-px", "--cycles", "200", "--json"},
			{"stress", "--backend", "process", "-s", "set-nx-px-del", "--node-faults", "pause", "--fault-every", "100ms", "--cycles", "300", "--duration", "2m", "--json"},
		},
		"check": {{"check", "--addr", checkAddr, "--json"}},
		"bench": {{"bench", "--backend", "process", "--stores", "redis", "--cycles", "5", "--rounds", "1", "--contenders", "2", "--contend-time", "100ms", "--json"}},
	}
}

// TestJSONOutputsMatchSchemas runs every command that has --json on real
// servers and validates its output against its schema in docs/schemas
// (additionalProperties false: a key renamed or added without its schema
// fails), and checks that every key is snake_case.
func TestJSONOutputsMatchSchemas(t *testing.T) {
	t.Parallel()
	schemas := compileSchemas(t)
	s := redistest.StartOne(t)
	runs := jsonRuns(s.Addr)

	// Every command with a --json flag has its runs and its schema.
	root := newRoot()
	var withJSON []string
	for _, c := range root.Commands() {
		if c.Flags().Lookup("json") != nil {
			withJSON = append(withJSON, c.Name())
		}
	}
	sort.Strings(withJSON)
	var covered, described []string
	for name := range runs {
		covered = append(covered, name)
	}
	for name := range schemas {
		described = append(described, name)
	}
	sort.Strings(covered)
	sort.Strings(described)
	assert.Equal(t, withJSON, covered, "every command with --json is run here")
	assert.Equal(t, withJSON, described, "every command with --json has docs/schemas/<command>.schema.json")

	for name, lines := range runs {
		for _, args := range lines {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				out, errOut, err := run(t, args...)
				require.NoError(t, err, errOut)
				v := parseJSON(t, out)
				assert.NoError(t, schemas[name].Validate(v), "docs/schemas/%s.schema.json", name)
				ks := map[string]bool{}
				keys(v, ks)
				for k := range ks {
					assert.Regexp(t, snakeKey, k, "a key in snake_case")
				}
			})
		}
	}
}

// TestSchemasRefuseRenamedKeys: the schemas fail an output whose key was
// renamed (the Go field name, or a duration without its unit), so that the
// test above would catch it.
func TestSchemasRefuseRenamedKeys(t *testing.T) {
	schemas := compileSchemas(t)
	cases := []struct {
		schema, good, bad string
	}{
		{"explore", `{"scenario":"s","strategy":"x","schedules":1,"violations":0,"elapsed_ns":5,"schedules_per_second":1,"skipped":0,"naive":1,"commands":3,"complete":true,"outcome":"SAFE","headline":"SAFE"}`,
			`{"Scenario":"s","strategy":"x","schedules":1,"violations":0,"elapsed_ns":5,"schedules_per_second":1,"skipped":0,"naive":1,"commands":3,"complete":true,"outcome":"SAFE","headline":"SAFE"}`},
		{"stress", `{"strategy":"x","clients":1,"ttl_ns":1,"elapsed_ns":1,"cycles":1,"cycles_per_second":1,"acquire_p50_ns":1,"acquire_p99_ns":1,"errors":0,"pauses":0,"crashes":0,"overlapping_holds":0,"lost_updates":1,"fence_refusals":0,"violations":{"lost_update":1},"first":null}`,
			`{"strategy":"x","clients":1,"ttl_ns":1,"elapsed_ns":1,"cycles":1,"cycles_per_second":1,"acquire_p50_ns":1,"acquire_p99_ns":1,"errors":0,"pauses":0,"crashes":0,"overlapping_holds":0,"lost_updates":1,"fence_refusals":0,"violations":{"lost update":1},"first":null}`},
		{"stress", `{"strategy":"x","clients":1,"ttl_ns":1,"elapsed_ns":1,"cycles":1,"cycles_per_second":1,"acquire_p50_ns":1,"acquire_p99_ns":1,"errors":0,"pauses":0,"crashes":0,"overlapping_holds":0,"lost_updates":0,"fence_refusals":0,"violations":{},"first":null}`,
			`{"strategy":"x","clients":1,"ttl":1,"elapsed_ns":1,"cycles":1,"cycles_per_second":1,"acquire_p50_ns":1,"acquire_p99_ns":1,"errors":0,"pauses":0,"crashes":0,"overlapping_holds":0,"lost_updates":0,"fence_refusals":0,"violations":{},"first":null}`},
		{"bench", `{"rounds":1,"cycles":1,"contenders":2,"contend_ns":1,"servers":[],"rows":[{"name":"a","store":"redis","strategy":"a","cycle_mean_ns":1,"cycle_p50_ns":1,"cycle_p99_ns":1,"cycle_ratio":1,"locks":1,"locks_per_second":1,"wait_p50_ns":1,"wait_p99_ns":1}]}`,
			`{"rounds":1,"cycles":1,"contenders":2,"contend_ns":1,"servers":[],"rows":[{"name":"a","store":"redis","strategy":"a","cycle_mean":1,"cycle_p50_ns":1,"cycle_p99_ns":1,"cycle_ratio":1,"locks":1,"locks_per_second":1,"wait_p50_ns":1,"wait_p99_ns":1}]}`},
		{"bench", `{"rounds":1,"cycles":1,"contenders":2,"contend_ns":1,"servers":[],"rows":[{"name":"a","store":"etcd","strategy":"a","skipped":"etcd is not installed"}]}`,
			`{"rounds":1,"cycles":1,"contenders":2,"contend_ns":1,"servers":[],"rows":[{"name":"a","store":"etcd","strategy":"a","skipped":"etcd is not installed","cycle_mean_ns":1}]}`},
		{"list", `[{"name":"a","family":"f","summary":"s","source":"s","weaknesses":[],"properties":{"atomic_acquire":true,"server_ttl":true,"owner_checked_release":true,"fencing":true,"extend":true,"multi_node":false}}]`,
			`[{"name":"a","family":"f","summary":"s","source":"s","weaknesses":[],"properties":{"atomicAcquire":true,"server_ttl":true,"owner_checked_release":true,"fencing":true,"extend":true,"multi_node":false}}]`},
	}
	for _, c := range cases {
		assert.NoError(t, schemas[c.schema].Validate(parseJSON(t, c.good)), c.good)
		assert.Error(t, schemas[c.schema].Validate(parseJSON(t, c.bad)), c.bad)
	}
}

// TestJSONDocExamples: every example of docs/json.md is valid against the
// schema of the section it is in, so the page shows outputs as they are.
func TestJSONDocExamples(t *testing.T) {
	schemas := compileSchemas(t)
	b, err := os.ReadFile("../docs/json.md")
	require.NoError(t, err)
	section := regexp.MustCompile("(?m)^## `locklab ([a-z]+)")
	fence := regexp.MustCompile("(?s)```json\n(.*?)```")
	seen := map[string]bool{}
	parts := section.FindAllStringSubmatchIndex(string(b), -1)
	for i, p := range parts {
		name := string(b[p[2]:p[3]])
		end := len(b)
		if i+1 < len(parts) {
			end = parts[i+1][0]
		}
		for _, m := range fence.FindAllStringSubmatch(string(b[p[0]:end]), -1) {
			sch, ok := schemas[name]
			require.True(t, ok, "docs/json.md: a section for %s, which has no schema", name)
			assert.NoError(t, sch.Validate(parseJSON(t, m[1])), "docs/json.md, the example of locklab %s", name)
			seen[name] = true
		}
	}
	for name := range schemas {
		assert.True(t, seen[name], "docs/json.md shows an example of locklab %s --json", name)
	}
}
