package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// The goals of issue #24, as numbers.
const (
	costScaleN          = "1000" // the N the latency goals are stated for
	costShare           = "24"   // the active share the memory goals are stated for
	maxOnDemandVsAlways = 0.3
	maxActivationMs     = 1000.0
)

// costModes are the data planes of BenchmarkCost, in the order they are shown.
var costModes = []string{"always", "onDemand", "sidecar"}

// costKey names one cost measurement: a mode, an active share in percent and N.
type costKey struct{ mode, share, n string }

// latencyKey names one mode's activation latencies at N.
type latencyKey struct{ mode, n string }

// costData is what the raw output says about cost.
type costData struct {
	cells   map[costKey]*series
	latency map[latencyKey]*series
	ns      []string // N values with cost cells, ascending
	shares  []string // ascending
}

// addCost files a BenchmarkCost line (cost/MODE/share=S/N=n or cost/latency/MODE/N=n); it
// reports false for other lines.
func (c *costData) addCost(r result) bool {
	name, ok := strings.CutPrefix(r.name, "BenchmarkCost/cost/")
	if !ok {
		return strings.HasPrefix(r.name, "BenchmarkCost")
	}
	parts := strings.Split(name, "/")
	n, hasN := strings.CutPrefix(parts[len(parts)-1], "N=")
	if !hasN || len(parts) != 3 {
		return true
	}
	if parts[0] == "latency" {
		k := latencyKey{parts[1], n}
		if c.latency[k] == nil {
			c.latency[k] = &series{metrics: map[string]*stat{}}
		}
		c.latency[k].add(r)
		return true
	}
	share, ok := strings.CutPrefix(parts[1], "share=")
	if !ok {
		return true
	}
	k := costKey{parts[0], share, n}
	if c.cells[k] == nil {
		c.cells[k] = &series{metrics: map[string]*stat{}}
	}
	c.cells[k].add(r)
	if !contains(c.ns, n) {
		c.ns = append(c.ns, n)
		sortNumeric(c.ns)
	}
	if !contains(c.shares, share) {
		c.shares = append(c.shares, share)
		sortNumeric(c.shares)
	}
	return true
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func sortNumeric(s []string) {
	sort.Slice(s, func(i, j int) bool { a, _ := strconv.Atoi(s[i]); b, _ := strconv.Atoi(s[j]); return a < b })
}

// largest is the largest N with cost cells, or "".
func (c *costData) largest() string {
	if len(c.ns) == 0 {
		return ""
	}
	return c.ns[len(c.ns)-1]
}

func (c *costData) median(k costKey, unit string) (float64, bool) {
	s := c.cells[k]
	if s == nil || s.metrics[unit] == nil {
		return 0, false
	}
	return s.get(unit).median(), true
}

// writeCost writes the cost section for the largest N measured, with the chart at chartPath
// (relative to BENCHMARKS.md), which it also writes when chartPath is not empty.
func writeCost(w io.Writer, c *costData, chartPath string) error {
	n := c.largest()
	if n == "" {
		return nil
	}
	fmt.Fprintf(w, "\n## Cost: what the waypoints reserve, N=%s\n\n", n)
	fmt.Fprintf(w, "BenchmarkCost (internal/bench) runs the reference controller over N Profile namespaces, each with a\n"+
		"notebook Service: an active namespace has an endpoint (a running notebook pod), a culled one an\n"+
		"EndpointSlice without endpoints. For each share of active namespaces it waits until the controller\n"+
		"has converged, counts the waypoint Gateways it keeps and computes what they reserve from the class\n"+
		"defaults the configuration emits (requests × the smallest replica count; Istio's 100m CPU and 128Mi\n"+
		"with the default sizing). Sidecar mode reserves one istio-proxy per running pod at Istio's sidecar\n"+
		"requests (istio/istio 1.30.3 manifests/charts/istio-control/istio-discovery/values.yaml,\n"+
		"global.proxy.resources: 100m, 128Mi). Node agents (ztunnel, istio-cni) run in every mode and are left out.\n\n")
	if chartPath != "" {
		fmt.Fprintf(w, "![reserved memory against the active share, one line per mode](%s)\n\n", chartPath)
	}
	fmt.Fprintf(w, "| active | mode | waypoints | running pods | reserved CPU (cores) | reserved memory (GiB) | converged |\n| ---: | --- | ---: | ---: | ---: | ---: | --- |\n")
	for _, share := range c.shares {
		for _, mode := range costModes {
			s := c.cells[costKey{mode, share, n}]
			if s == nil {
				continue
			}
			conv := "yes"
			if s.get("converged").median() < 1 {
				conv = "**no**"
			}
			fmt.Fprintf(w, "| %s%% | %s | %.0f | %.0f | %.1f | %.2f | %s |\n", share, mode, s.get("waypoints").median(), s.get("running-pods").median(),
				s.get("reserved-mCPU").median()/1000, s.get("reserved-MiB").median()/1024, conv)
		}
	}
	var lat []string
	for _, mode := range costModes {
		s := c.latency[latencyKey{mode, n}]
		if s == nil {
			continue
		}
		lat = append(lat, fmt.Sprintf("| %s | %.0f | %.0f | %.0f | %.0f | %.0f |", mode, s.get("samples").median(),
			s.get("endpoint-to-gateway-p50-ms").median(), s.get("endpoint-to-gateway-p99-ms").median(),
			s.get("programmed-to-routed-p50-ms").median(), s.get("programmed-to-routed-p99-ms").median()))
	}
	if len(lat) > 0 {
		fmt.Fprintf(w, "\nActivation, controller side, as the benchmark's own watches see it: the namespaces of the first step\n"+
			"(0%% to 10%% active) activated one at a time while the controller holds all N. *To Gateway* is from the\n"+
			"EndpointSlice update being sent to the Gateway's watch event; *to routed* from the benchmark (playing\n"+
			"istiod) writing Programmed to the namespace's istio.io/use-waypoint watch event. Milliseconds.\n\n"+
			"| mode | samples | to Gateway p50 | to Gateway p99 | to routed p50 | to routed p99 |\n| --- | ---: | ---: | ---: | ---: | ---: |\n%s\n", strings.Join(lat, "\n"))
	}
	if chartPath == "" {
		return nil
	}
	return os.WriteFile(chartPath, []byte(costChart(c, n)), 0o644)
}

func writeCostGoals(w io.Writer, c *costData) {
	fmt.Fprintf(w, "\n## Goals (issue #24, waypoints on demand)\n\nComputed from the cost benchmark below (BenchmarkCost).\n\n| goal | status | numbers |\n| --- | --- | --- |\n")
	for _, v := range costGoals(c) {
		fmt.Fprintf(w, "| %s | %s | %s |\n", v.goal, v.status, v.numbers)
	}
}

// costGoals are the verdicts of issue #24's goals that the cost benchmark decides.
func costGoals(c *costData) []verdict {
	n := c.largest()
	if n == "" {
		return []verdict{{"cost goals of issue #24", unmeasured, "no cost benchmark in the raw output"}}
	}
	var out []verdict
	on, okOn := c.median(costKey{"onDemand", costShare, n}, "reserved-MiB")
	al, okAl := c.median(costKey{"always", costShare, n}, "reserved-MiB")
	sc, okSc := c.median(costKey{"sidecar", costShare, n}, "reserved-MiB")
	if okOn && okAl && okSc {
		ratio := 0.0
		if al > 0 {
			ratio = on / al
		}
		out = append(out, verdict{fmt.Sprintf("at %s%% active, reserved waypoint memory with onDemand ≤ %.1f× always and ≤ sidecar mode's", costShare, maxOnDemandVsAlways),
			met(al > 0 && ratio <= maxOnDemandVsAlways && on <= sc),
			fmt.Sprintf("N=%s: onDemand %.2f GiB, always %.2f GiB (%.2f×), sidecar %.2f GiB", n, on/1024, al/1024, ratio, sc/1024)})
	} else {
		out = append(out, verdict{"reserved memory at " + costShare + "% active", unmeasured, "a mode is missing at N=" + n})
	}
	idle, okIdle := c.median(costKey{"onDemand", "0", n}, "idle")
	closed, _ := c.median(costKey{"onDemand", "0", n}, "idle-closed-no-waypoint")
	wp, _ := c.median(costKey{"onDemand", "0", n}, "waypoints")
	if okIdle {
		out = append(out, verdict{"an idle namespace runs 0 waypoint pods and stays closed",
			met(wp == 0 && closed == idle && idle > 0),
			fmt.Sprintf("N=%s at 0%% active: %.0f waypoints; %.0f of %.0f idle namespaces in ambient with their ztunnel policy and no waypoint", n, wp, closed, idle)})
	}
	s := c.latency[latencyKey{"onDemand", costScaleN}]
	if s == nil {
		msg := "no onDemand latency at N=" + costScaleN
		if l := c.latency[latencyKey{"onDemand", n}]; l != nil {
			msg += fmt.Sprintf("; at N=%s: to Gateway p50 %.0f ms, p99 %.0f ms; to routed p50 %.0f ms, p99 %.0f ms (%.0f samples)", n,
				l.get("endpoint-to-gateway-p50-ms").median(), l.get("endpoint-to-gateway-p99-ms").median(),
				l.get("programmed-to-routed-p50-ms").median(), l.get("programmed-to-routed-p99-ms").median(), l.get("samples").median())
		}
		out = append(out, verdict{fmt.Sprintf("activation ≤ %.0f s from EndpointSlice to Gateway and from Programmed to routed at N=%s (p50 and p99)", maxActivationMs/1000, costScaleN), unmeasured, msg})
		return out
	}
	worst := max(s.get("endpoint-to-gateway-p99-ms").median(), s.get("programmed-to-routed-p99-ms").median())
	out = append(out, verdict{fmt.Sprintf("activation ≤ %.0f s from EndpointSlice to Gateway and from Programmed to routed at N=%s (p50 and p99)", maxActivationMs/1000, costScaleN),
		met(worst <= maxActivationMs),
		fmt.Sprintf("to Gateway p50 %.0f ms, p99 %.0f ms; to routed p50 %.0f ms, p99 %.0f ms (%.0f samples)",
			s.get("endpoint-to-gateway-p50-ms").median(), s.get("endpoint-to-gateway-p99-ms").median(),
			s.get("programmed-to-routed-p50-ms").median(), s.get("programmed-to-routed-p99-ms").median(), s.get("samples").median())})
	return out
}

// costChart is an SVG line chart of reserved memory (GiB) against the active share, one line per
// mode, at N=n.
func costChart(c *costData, n string) string {
	const (
		width, height          = 680, 380
		left, right, top, bott = 70, 150, 40, 50
	)
	colors := map[string]string{"always": "#d62728", "onDemand": "#2ca02c", "sidecar": "#1f77b4"}
	dashes := map[string]string{"always": "", "onDemand": "", "sidecar": ` stroke-dasharray="6 4"`}
	maxGiB := 0.0
	for k, s := range c.cells {
		if k.n == n {
			maxGiB = max(maxGiB, s.get("reserved-MiB").median()/1024)
		}
	}
	if maxGiB == 0 {
		maxGiB = 1
	}
	step := niceStep(maxGiB / 5)
	top5 := step * float64(int(maxGiB/step)+1)
	x := func(share float64) float64 { return left + share/100*float64(width-left-right) }
	y := func(gib float64) float64 { return float64(height-bott) - gib/top5*float64(height-top-bott) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" font-weight="bold">Reserved memory for the mesh proxies, N=%s Profile namespaces</text>`+"\n", left, n)
	for v := 0.0; v <= top5+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, y(v), width-right, y(v), left-6, y(v)+4, strconv.FormatFloat(v, 'f', -1, 64))
	}
	for _, share := range c.shares {
		sv, _ := strconv.ParseFloat(share, 64)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999"/><text x="%.1f" y="%d" text-anchor="middle">%s%%</text>`+"\n",
			x(sv), height-bott, x(sv), height-bott+5, x(sv), height-bott+18, share)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n",
		left, height-bott, width-right, height-bott, left, top, left, height-bott)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">namespaces active (a running notebook)</text>`+"\n", (left+width-right)/2, height-12)
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">reserved memory (GiB)</text>`+"\n", (top+height-bott)/2)
	for i, mode := range costModes {
		var pts []string
		for _, share := range c.shares {
			mib, ok := c.median(costKey{mode, share, n}, "reserved-MiB")
			if !ok {
				continue
			}
			sv, _ := strconv.ParseFloat(share, 64)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(sv), y(mib/1024)))
		}
		if len(pts) == 0 {
			continue
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2.5"%s points="%s"/>`+"\n", colors[mode], dashes[mode], strings.Join(pts, " "))
		for _, p := range pts {
			xy := strings.Split(p, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3.5" fill="%s"/>`+"\n", xy[0], xy[1], colors[mode])
		}
		ly := top + 20 + 22*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/><text x="%d" y="%d">%s</text>`+"\n",
			width-right+14, ly, width-right+44, ly, colors[mode], dashes[mode], width-right+50, ly+4, legend(mode))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func legend(mode string) string {
	switch mode {
	case "always":
		return "ambient, always"
	case "onDemand":
		return "ambient, onDemand"
	}
	return "sidecars"
}

// niceStep rounds a raw axis step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	p := 1.0
	for p*10 <= raw {
		p *= 10
	}
	for p > raw && p > 1e-9 {
		p /= 10
	}
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}
