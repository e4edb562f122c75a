package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cost builds BenchmarkCost lines at n: each mode's reserved MiB by share, and onDemand latencies.
func cost(n string, mib map[string][5]float64, latencyP99 float64) string {
	var b strings.Builder
	for i, share := range []string{"0", "10", "24", "50", "100"} {
		for _, mode := range costModes {
			fmt.Fprintf(&b, "BenchmarkCost/cost/%s/share=%s/N=%s-2 1 1 ns/op 1 converged %.0f reserved-MiB %.0f reserved-mCPU %.0f waypoints 0 running-pods",
				mode, share, n, mib[mode][i], mib[mode][i]/1.28, mib[mode][i]/128)
			if mode == "onDemand" {
				fmt.Fprintf(&b, " 10 idle %.0f idle-closed-no-waypoint", 10-mib[mode][i]/128)
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "BenchmarkCost/cost/latency/onDemand/N=%s-2 1 1 ns/op 12 endpoint-to-gateway-p50-ms %.0f endpoint-to-gateway-p99-ms 8 programmed-to-routed-p50-ms 20 programmed-to-routed-p99-ms 100 samples\n", n, latencyP99)
	return b.String()
}

// The cost section, its goals and its chart follow the numbers, both ways.
func TestCostGoalsAndChartFollowTheNumbers(t *testing.T) {
	good := map[string][5]float64{"always": {1280, 1280, 1280, 1280, 1280}, "onDemand": {0, 128, 256, 640, 1280}, "sidecar": {0, 128, 256, 640, 1280}}
	chart := filepath.Join(t.TempDir(), "cost.svg")
	var out bytes.Buffer
	require.NoError(t, write(&out, "make bench", machine{}, []string{cost("1000", good, 300)}, files{chart: chart}))
	r := out.String()
	assert.Contains(t, r, "| at 24% active, reserved waypoint memory with onDemand ≤ 0.3× always and ≤ sidecar mode's | met | N=1000: onDemand 0.25 GiB, always 1.25 GiB (0.20×), sidecar 0.25 GiB |")
	assert.Contains(t, r, "| an idle namespace runs 0 waypoint pods and stays closed | met |")
	assert.Contains(t, r, "| activation ≤ 1 s from EndpointSlice to Gateway and from Programmed to routed at N=1000 (p50 and p99) | met | to Gateway p50 12 ms, p99 300 ms")
	assert.Contains(t, r, "| 24% | onDemand | 2 | 0 | 0.2 | 0.25 | yes |")
	assert.Contains(t, r, "![reserved memory against the active share, one line per mode]("+chart+")")
	svg, err := os.ReadFile(chart)
	require.NoError(t, err)
	assert.Equal(t, 3, strings.Count(string(svg), "<polyline"), "one line per mode")
	assert.Contains(t, string(svg), "ambient, onDemand")
	assert.Contains(t, string(svg), "N=1000 Profile namespaces")

	bad := map[string][5]float64{"always": {1280, 1280, 1280, 1280, 1280}, "onDemand": {128, 256, 512, 640, 1280}, "sidecar": {0, 128, 256, 640, 1280}}
	out.Reset()
	require.NoError(t, write(&out, "make bench", machine{}, []string{cost("100", bad, 1500)}, files{}))
	r = out.String()
	assert.Contains(t, r, "| at 24% active, reserved waypoint memory with onDemand ≤ 0.3× always and ≤ sidecar mode's | **not met** | N=100: onDemand 0.50 GiB, always 1.25 GiB (0.40×)")
	assert.Contains(t, r, "| an idle namespace runs 0 waypoint pods and stays closed | **not met** | N=100 at 0% active: 1 waypoints")
	assert.Contains(t, r, "| not measured | no onDemand latency at N=1000; at N=100: to Gateway p50 12 ms, p99 1500 ms")
	assert.NotContains(t, r, "![reserved memory", "no chart without a path")
}
