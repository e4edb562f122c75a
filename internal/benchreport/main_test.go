package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const gen = `cpu: Test CPU
BenchmarkFullSet/generate/ambient-2   	  100	      4000 ns/op	    100 B/op	      55 allocs/op
BenchmarkFullSet/generate/ambient-2   	  100	      6000 ns/op	    100 B/op	      55 allocs/op
BenchmarkFullSet/generate/ambient-2   	  100	      4500 ns/op	    100 B/op	      55 allocs/op
`

// api builds the raw lines of one N with three runs; the library's numbers scaled by f.
func api(n string, libWall, baseWall [3]string, libRSS, baseRSS string) string {
	var b strings.Builder
	b.WriteString("BenchmarkAPI/clutter/N=" + n + "-2 1 1 ns/op 310 objects 100 objects/s 3.1 wall-s\n")
	for i, run := range []string{"1", "2", "3"} {
		b.WriteString("informers library run=" + run + ": namespaces, pods\n")
		b.WriteString("writes/ns library first run=" + run + " N=" + n + ": PATCH namespaces 2.00, PATCH gateways 1.00\n")
		b.WriteString("BenchmarkAPI/first/library/run=" + run + "/N=" + n + "-2 1 1 ns/op 0 reads/ns 5 writes/ns " + libWall[i] + " wall-s\n")
		b.WriteString("BenchmarkAPI/steady/library/run=" + run + "/N=" + n + "-2 1 1 ns/op 0 reads/ns 0 writes/ns 0.1 wall-s\n")
		b.WriteString("BenchmarkAPI/change/library/run=" + run + "/N=" + n + "-2 1 1 ns/op 0 reads/ns 1 writes/ns " + libWall[i] + " wall-s\n")
		b.WriteString("BenchmarkAPI/memory/library/run=" + run + "/N=" + n + "-2 1 1 ns/op " + libRSS + " peak-RSS-MiB 50 live-heap-MiB\n")
		b.WriteString("BenchmarkAPI/first/baseline/run=" + run + "/N=" + n + "-2 1 1 ns/op 0 reads/ns 5 writes/ns " + baseWall[i] + " wall-s\n")
		b.WriteString("BenchmarkAPI/steady/baseline/run=" + run + "/N=" + n + "-2 1 1 ns/op 0 reads/ns 0 writes/ns 0.1 wall-s\n")
		b.WriteString("BenchmarkAPI/change/baseline/run=" + run + "/N=" + n + "-2 1 1 ns/op 0 reads/ns 1 writes/ns " + baseWall[i] + " wall-s\n")
		b.WriteString("BenchmarkAPI/memory/baseline/run=" + run + "/N=" + n + "-2 1 1 ns/op " + baseRSS + " peak-RSS-MiB 60 live-heap-MiB\n")
	}
	return b.String()
}

func report(t *testing.T, raws ...string) string {
	var out bytes.Buffer
	require.NoError(t, write(&out, "make bench", machine{date: "2026-11-30", cores: 2, goVersion: "go"}, raws, files{}))
	return out.String()
}

// TestGoalsFollowTheNumbers checks that each goal's status is computed, both ways.
func TestGoalsFollowTheNumbers(t *testing.T) {
	good := report(t, gen, api("1000", [3]string{"10", "11", "30"}, [3]string{"10.5", "11", "9"}, "100", "200"),
		api("10000", [3]string{"100", "105", "90"}, [3]string{"100", "100", "100"}, "250", "400"))
	assert.Contains(t, good, "| peak RSS of the library at N=10000 ≤ the baseline's and ≤ 300 MiB | met | library 250 MiB, baseline 400 MiB |")
	assert.Contains(t, good, "| first pass: wall ≤ 1.05× the baseline's (median) | met | N=1000: 1.05×; N=10000: 1.00× |")
	assert.Contains(t, good, "| change pass at N=10000: wall ≤ 1.1× the baseline's (median) | met | 1.00×")
	assert.Contains(t, good, "| generation of the full ambient set ≤ 5 µs and ≤ 60 allocs | met | 4.5 µs, 55 allocs")
	// Medians and the spread of the three runs.
	assert.Contains(t, good, "| first | library | 3 | 0.00 | - | - | - | - | 5.00 | 11.00 (10.00–30.00) | 1.05× |")
	assert.Contains(t, good, "- library: namespaces, pods")
	assert.Contains(t, good, "| first | library | PATCH namespaces 2.00, PATCH gateways 1.00 |")

	bad := report(t, api("10000", [3]string{"120", "120", "120"}, [3]string{"100", "100", "100"}, "350", "400"))
	assert.Contains(t, bad, "| peak RSS of the library at N=10000 ≤ the baseline's and ≤ 300 MiB | **not met** | library 350 MiB")
	assert.Contains(t, bad, "| change pass at N=10000: wall ≤ 1.1× the baseline's (median) | **not met** | 1.20×")
	assert.Contains(t, bad, "| generation of the full ambient set ≤ 5 µs and ≤ 60 allocs | not measured |")

	small := report(t, api("50", [3]string{"1", "1", "1"}, [3]string{"1", "1", "1"}, "40", "45"))
	assert.Contains(t, small, "| peak RSS of the library at N=10000 ≤ the baseline's and ≤ 300 MiB | not measured | no N=10000 run; at N=50 it would be met: library 40 MiB, baseline 45 MiB |")
}

// TestOnDemandMemoryGoalFollowsTheNumbers checks the goal of the library with waypoints onDemand
// (which caches EndpointSlices) against the baseline of the same run, both ways, and its row in the
// memory table.
func TestOnDemandMemoryGoalFollowsTheNumbers(t *testing.T) {
	const goal = "| peak RSS of the library with waypoints onDemand at N=10000, EndpointSlices in the clutter, ≤ the baseline's |"
	memory := func(impl, rss string) string {
		return "BenchmarkAPI/memory/" + impl + "/run=1/N=10000-2 1 2000 ns/op 100 live-heap-MiB " + rss + " peak-RSS-MiB 1.5 start-s\n"
	}
	met := report(t, memory("library-onDemand", "600")+memory("baseline", "650"))
	assert.Contains(t, met, goal+" met | library-onDemand 600 MiB, baseline 650 MiB |")
	assert.Contains(t, met, "| library-onDemand | 1 | 600 | 100 | 0.92× | 1.5 |")
	notMet := report(t, memory("library-onDemand", "700")+memory("baseline", "650"))
	assert.Contains(t, notMet, goal+" **not met** | library-onDemand 700 MiB, baseline 650 MiB |")
	missing := report(t, memory("library", "600")+memory("baseline", "650"))
	assert.Contains(t, missing, goal+" not measured | library-onDemand (BENCH_PROVISION=onDemand) or baseline missing |")
}

// The waiting benchmark has its own table: reconciles in an hour, fixed requeue and backoff.
func TestWaitingNamespaceTable(t *testing.T) {
	out := report(t, "BenchmarkWaiting/fixed-2 1 452388578 ns/op 240.0 reconciles/h\nBenchmarkWaiting/backoff-2 1 25463430 ns/op 11.00 reconciles/h\n")
	assert.Contains(t, out, "## Waiting namespace")
	assert.Contains(t, out, "| fixed | 240 | 1 |")
	assert.Contains(t, out, "| backoff | 11 | 1 |")
	assert.NotContains(t, out, "## Generation", "not a generation benchmark")
}

// The switch benchmark has its own table, one row per N.
func TestSwitchTable(t *testing.T) {
	out := report(t, "BenchmarkSwitch/switch/ambient-to-sidecar/N=10-2 1 3868 ns/op 197.0 ms/namespace 0.6717 newcomer-s 0.3409 newcomer/switch 1.970 switch-s\n"+
		"BenchmarkSwitch/switch/ambient-to-sidecar/N=1000-2 1 3868 ns/op 100.0 ms/namespace 5.5 newcomer-s 0.055 newcomer/switch 100.0 switch-s 3.65 workers-s\n")
	assert.Contains(t, out, "## Switch of mesh mode")
	assert.Contains(t, out, "| ambient-to-sidecar | 10 | 1.97 | 197.0 | 0.67 | 0.34 | - |", "a run from before workers-s")
	assert.Contains(t, out, "| ambient-to-sidecar | 1000 | 100.00 | 100.0 | 5.50 | 0.06 | 3.65 |")
	assert.NotContains(t, out, "## Generation", "not a generation benchmark")
}

// The raw output goes to a file of its own, which the report links: the report holds the tables,
// the raw file every line benchstat reads and what each process printed, and nothing else.
func TestRawOutputIsAFileBesideTheReport(t *testing.T) {
	raw := filepath.Join(t.TempDir(), "BENCHMARKS-raw.txt")
	apiLines := api("1000", [3]string{"10", "11", "12"}, [3]string{"10", "11", "12"}, "100", "200")
	var out bytes.Buffer
	require.NoError(t, write(&out, "make bench", machine{}, []string{gen + "some log line\nPASS\n", apiLines}, files{raw: raw}))
	report := out.String()
	assert.Contains(t, report, "\n## Raw output\n\n["+raw+"]("+raw+"): the lines benchstat reads")
	assert.NotContains(t, report, "BenchmarkFullSet/generate/ambient-2", "raw lines stay out of the report")
	assert.NotContains(t, report, "```", "no raw block in the report")
	assert.True(t, strings.HasPrefix(report, "# Benchmarks\n\nFor "), "the first line says whom the report is for:\n%s", report)

	written, err := os.ReadFile(raw)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(written), "\n"), "\n")
	assert.Equal(t, "cpu: Test CPU", lines[0], "in the order of the raw files")
	assert.Contains(t, lines, "PASS")
	assert.Contains(t, lines, "informers library run=1: namespaces, pods")
	assert.Contains(t, lines, "writes/ns library first run=1 N=1000: PATCH namespaces 2.00, PATCH gateways 1.00")
	assert.NotContains(t, lines, "some log line", "only what benchstat reads and what the processes printed")
	assert.Len(t, lines, strings.Count(gen, "\n")+1+strings.Count(apiLines, "\n"), "gen's lines, PASS, and the API benchmark's lines")

	out.Reset()
	require.NoError(t, write(&out, "make bench", machine{}, []string{gen}, files{}))
	assert.NotContains(t, out.String(), "## Raw output", "no raw section without a path")
}
