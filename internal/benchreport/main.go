// Command benchreport turns raw `go test -bench` output into BENCHMARKS.md: the machine, the date,
// the command, the generation costs, the API benchmark per N with each implementation side by
// side (memory, requests per namespace and wall time by pass: medians over the rotated runs and
// their spread), a Goals section computed from those numbers, and a link to the raw output, which
// it writes to a file of its own beside the report (benchstat reads that file as it is): the
// report is for readers, the raw file for benchstat and for checking a number.
//
//	go run ./internal/benchreport -command "make bench" -raw BENCHMARKS-raw.txt gen.txt api-1000.txt [api-10000.txt] > BENCHMARKS.md
//
// Raw files may be partial (a run that stopped early): every table says how many runs it has.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	command := flag.String("command", "make bench", "the command that reproduces the numbers")
	chart := flag.String("chart", "", "where to write the cost chart (SVG), relative to BENCHMARKS.md; empty: none")
	raw := flag.String("raw", "", "where to write the raw output (benchstat's lines), relative to BENCHMARKS.md; empty: none")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: benchreport [-command CMD] [-chart SVG] [-raw TXT] RAW...")
		os.Exit(2)
	}
	var raws []string
	for _, f := range flag.Args() {
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
		raws = append(raws, string(data))
	}
	goVersion := runtime.Version()
	if out, err := exec.Command("go", "version").Output(); err == nil {
		goVersion = strings.TrimSpace(string(out))
	}
	m := machine{date: time.Now().UTC().Format("2006-01-02"), cores: runtime.NumCPU(), goVersion: goVersion}
	if err := write(os.Stdout, *command, m, raws, files{chart: *chart, raw: *raw}); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// files are where the report writes what it links to; an empty path: not written, not linked.
type files struct {
	chart string // the cost chart (SVG)
	raw   string // the raw output
}

type machine struct {
	date      string
	cores     int
	goVersion string
}

// result is one benchmark line: name and unit -> value.
type result struct {
	name    string
	metrics map[string]float64
}

// benchstatLine keeps the configuration and result lines and drops log noise.
var benchstatLine = regexp.MustCompile(`^((goos|goarch|pkg|cpu): |Benchmark|PASS$|ok )`)

var line = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// informersLine is what the API benchmark prints for each process: the informers it opened.
var informersLine = regexp.MustCompile(`^informers (\S+) run=\d+: (.*)$`)

// writesLine is what the API benchmark prints for each pass: its writes by verb and resource.
var writesLine = regexp.MustCompile(`^writes/ns (\S+) (\S+) run=(\d+) N=(\d+): (.*)$`)

func parse(raw string) []result {
	var out []result
	sc := bufio.NewScanner(strings.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		fields := strings.Fields(m[3])
		r := result{name: m[1], metrics: map[string]float64{}}
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err == nil {
				r.metrics[fields[i+1]] = v
			}
		}
		out = append(out, r)
	}
	return out
}

// stat is one metric over repeated runs.
type stat struct{ vals []float64 }

func (s *stat) add(v float64) { s.vals = append(s.vals, v) }

func (s stat) sorted() []float64 {
	v := append([]float64(nil), s.vals...)
	sort.Float64s(v)
	return v
}

// median of the runs; with an even count, the mean of the middle two.
func (s stat) median() float64 {
	v := s.sorted()
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func (s stat) min() float64 { v := s.sorted(); return v[0] }
func (s stat) max() float64 { v := s.sorted(); return v[len(v)-1] }

// series is one benchmark's metrics over its runs.
type series struct {
	runs    int
	metrics map[string]*stat
}

func (s *series) add(r result) {
	s.runs++
	for unit, v := range r.metrics {
		if s.metrics[unit] == nil {
			s.metrics[unit] = &stat{}
		}
		s.metrics[unit].add(v)
	}
}

func (s *series) get(unit string) stat {
	if s == nil || s.metrics[unit] == nil {
		return stat{}
	}
	return *s.metrics[unit]
}

// apiKey names a cell of the API tables: a pass (or "memory", "clutter"), an implementation and N.
type apiKey struct{ pass, impl, n string }

// data is everything the raw files say.
type data struct {
	gen       map[string]*series // generation benchmarks, by name
	genOrder  []string
	waiting   map[string]*series // BenchmarkWaiting, by requeue policy
	waitOrder []string
	switches  map[string]*series // BenchmarkSwitch, by "switch/N=n"
	swOrder   []string
	api       map[apiKey]*series
	ns        []string            // the N values, ascending
	informers map[string][]string // impl -> informers, first seen
	writesBy  map[apiKey]string   // run 1's writes by verb and resource
	cpu       string
	cost      costData
}

func collect(raws []string) *data {
	d := &data{gen: map[string]*series{}, waiting: map[string]*series{}, switches: map[string]*series{}, api: map[apiKey]*series{}, informers: map[string][]string{}, writesBy: map[apiKey]string{},
		cost: costData{cells: map[costKey]*series{}, latency: map[latencyKey]*series{}}}
	seenN := map[string]bool{}
	for _, raw := range raws {
		for _, l := range strings.Split(raw, "\n") {
			if c, ok := strings.CutPrefix(l, "cpu: "); ok {
				d.cpu = strings.TrimSpace(c)
			}
			if m := informersLine.FindStringSubmatch(l); m != nil && d.informers[m[1]] == nil {
				d.informers[m[1]] = strings.Split(m[2], ", ")
			}
			if m := writesLine.FindStringSubmatch(l); m != nil && m[3] == "1" {
				d.writesBy[apiKey{pass: m[2], impl: m[1], n: m[4]}] = m[5]
			}
		}
		for _, r := range parse(raw) {
			name, isAPI := strings.CutPrefix(r.name, "BenchmarkAPI/")
			if !isAPI && d.cost.addCost(r) {
				continue
			}
			if sw, ok := strings.CutPrefix(r.name, "BenchmarkSwitch/switch/"); ok {
				if d.switches[sw] == nil {
					d.switches[sw] = &series{metrics: map[string]*stat{}}
					d.swOrder = append(d.swOrder, sw)
				}
				d.switches[sw].add(r)
				continue
			}
			if policy, ok := strings.CutPrefix(r.name, "BenchmarkWaiting/"); ok {
				if d.waiting[policy] == nil {
					d.waiting[policy] = &series{metrics: map[string]*stat{}}
					d.waitOrder = append(d.waitOrder, policy)
				}
				d.waiting[policy].add(r)
				continue
			}
			if !isAPI {
				name = strings.TrimPrefix(r.name, "Benchmark")
				if d.gen[name] == nil {
					d.gen[name] = &series{metrics: map[string]*stat{}}
					d.genOrder = append(d.genOrder, name)
				}
				d.gen[name].add(r)
				continue
			}
			k, ok := keyOf(name)
			if !ok {
				continue
			}
			if d.api[k] == nil {
				d.api[k] = &series{metrics: map[string]*stat{}}
			}
			d.api[k].add(r)
			if !seenN[k.n] {
				seenN[k.n] = true
				d.ns = append(d.ns, k.n)
			}
		}
	}
	sort.Slice(d.ns, func(i, j int) bool { a, _ := strconv.Atoi(d.ns[i]); b, _ := strconv.Atoi(d.ns[j]); return a < b })
	return d
}

// keyOf reads pass/impl/run=R/N=n, clutter/N=n, or the older pass/impl/N=n.
func keyOf(name string) (apiKey, bool) {
	var parts []string
	for _, p := range strings.Split(name, "/") {
		if !strings.HasPrefix(p, "run=") {
			parts = append(parts, p)
		}
	}
	n, ok := strings.CutPrefix(parts[len(parts)-1], "N=")
	switch {
	case !ok:
		return apiKey{}, false
	case len(parts) == 2:
		return apiKey{pass: parts[0], n: n}, true
	case len(parts) == 3:
		return apiKey{pass: parts[0], impl: parts[1], n: n}, true
	}
	return apiKey{}, false
}

// impls are the implementations of the API benchmark, in the order of its tables; library-onDemand
// is the library with waypoints provisioned onDemand (BENCH_PROVISION), which caches EndpointSlices.
var impls = []string{"library", "library-onDemand", "baseline", "floor"}

var passes = []string{"first", "steady", "change"}

func write(w io.Writer, command string, m machine, raws []string, out files) error {
	d := collect(raws)
	fmt.Fprintf(w, "# Benchmarks\n\n%s\n\nMeasured on %s. Machine: %d cores (`nproc`), %s, %s.\n\n", audience, m.date, m.cores, d.cpu, m.goVersion)
	fmt.Fprintf(w, "Reproduce with `%s` (it takes long: the API benchmark creates N namespaces full of other\npeople's objects in a real API server and runs every implementation three times). Numbers are\nmedians over the runs in the raw output; `a–b` is the spread (min–max).\n\n", command)
	writeGoals(w, d)
	writeCostGoals(w, &d.cost)
	writeGeneration(w, d)
	writeWaiting(w, d)
	writeSwitch(w, d)
	for _, n := range d.ns {
		writeAPI(w, d, n)
	}
	if err := writeCost(w, &d.cost, out.chart); err != nil {
		return err
	}
	if out.raw == "" {
		return nil
	}
	fmt.Fprintf(w, "\n## Raw output\n\n[%s](%s): the lines benchstat reads, and what each process printed (informers,\nwrites by resource), as `go test` printed them.\n", out.raw, out.raw)
	return os.WriteFile(out.raw, []byte(rawLines(raws)), 0o644)
}

// audience is the report's first line: whom it is for.
const audience = "For maintainers and admins sizing a controller: what the library costs against the profiles\ncontroller's own pattern, in memory, API requests and time, and what the waypoints reserve."

// rawLines are the lines of the raw files benchstat reads, and the informers and writes each
// process printed, in the order of the files.
func rawLines(raws []string) string {
	var b strings.Builder
	for _, raw := range raws {
		for _, l := range strings.Split(raw, "\n") {
			if benchstatLine.MatchString(l) || informersLine.MatchString(l) || writesLine.MatchString(l) {
				b.WriteString(l + "\n")
			}
		}
	}
	return b.String()
}

func writeGeneration(w io.Writer, d *data) {
	if len(d.genOrder) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Generation, per namespace\n\n| benchmark | µs/op | B/op | allocs/op | runs |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, name := range d.genOrder {
		s := d.gen[name]
		fmt.Fprintf(w, "| %s | %.1f | %.0f | %.0f | %d |\n", name, s.get("ns/op").median()/1000, s.get("B/op").median(), s.get("allocs/op").median(), s.runs)
	}
}

// writeWaiting is BenchmarkWaiting's table: how often one namespace whose waypoint is not
// Programmed is reconciled in an hour without events.
func writeWaiting(w io.Writer, d *data) {
	if len(d.waitOrder) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Waiting namespace\n\nOne namespace whose waypoint never becomes Programmed (istiod down), the real plugins on a fake client, "+
		"no event in the hour: *fixed* requeues every wait after the Runner's WaitRequeue (15 s), as the reference controller did; "+
		"*backoff* doubles it up to kubeflow.DefaultMaxWaitRequeue while the namespace waits only for its waypoint (the Gateway watch ends the wait). "+
		"Reconciles per hour of 1,000 such namespaces are 1,000 times these.\n\n| requeue | reconciles in the first hour | runs |\n| --- | ---: | ---: |\n")
	for _, policy := range d.waitOrder {
		s := d.waiting[policy]
		fmt.Fprintf(w, "| %s | %.0f | %d |\n", policy, s.get("reconciles/h").median(), s.runs)
	}
}

// writeSwitch is BenchmarkSwitch's table: a full ambient-to-sidecar switch of N namespaces by
// the reference controller, and a Profile created as it starts.
func writeSwitch(w io.Writer, d *data) {
	if len(d.swOrder) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Switch of mesh mode\n\nThe reference controller (its own process) converges N Profile namespaces in ambient, the benchmark playing istiod, "+
		"and is restarted in sidecar mode: *switch s* is the time from the restart until every namespace is in sidecar mode (no waypoint, "+
		"no ambient label or ztunnel policy, injection on); *newcomer s* is the time a Profile created right after the restart takes to be "+
		"labelled for injection, and *newcomer/switch* its share of the switch (near 1: the new user waits behind everyone else); "+
		"*workers s* is when the restarted controller's workers started, its caches synced: what the newcomer waits past it, it waits in the queue.\n\n"+
		"| switch | N | switch s | ms/namespace | newcomer s | newcomer/switch | workers s |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, key := range d.swOrder {
		s := d.switches[key]
		name, n, _ := strings.Cut(key, "/N=")
		fmt.Fprintf(w, "| %s | %s | %.2f | %.1f | %.2f | %.2f | %s |\n", name, n, s.get("switch-s").median(), s.get("ms/namespace").median(),
			s.get("newcomer-s").median(), s.get("newcomer/switch").median(), spread(s.get("workers-s"), "%.2f"))
	}
}

func spread(s stat, format string) string {
	if len(s.vals) == 0 {
		return "-"
	}
	if s.min() == s.max() {
		return fmt.Sprintf(format, s.median())
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")", s.median(), s.min(), s.max())
}

func ratio(a, b stat) string {
	if len(a.vals) == 0 || len(b.vals) == 0 || b.median() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a.median()/b.median())
}

func writeAPI(w io.Writer, d *data, n string) {
	fmt.Fprintf(w, "\n## API benchmark, N=%s\n\n", n)
	if c := d.api[apiKey{pass: "clutter", n: n}]; c != nil {
		fmt.Fprintf(w, "Setup: %.0f objects (namespaces and their clutter) created in %.0f s, %.0f objects/s; not measured below.\n\n",
			c.get("objects").median(), c.get("wall-s").median(), c.get("objects/s").median())
	}
	fmt.Fprintf(w, "Each implementation runs in a process of its own (see internal/bench): *library* is this module's runner\nwired as cmd/profile-plugins-controller wires it; *baseline* is the profiles controller's pattern (cached Get,\nCreate or compare-and-Update per object, one Update of the namespace's labels), caching what the\nprofiles controller caches; *floor* creates the same objects with no reads. Each pass reconciles N\nnamespaces with 4 workers; `reads/ns` counts only requests that reached the API server.\n\n")
	fmt.Fprintf(w, "| memory | runs | peak RSS MiB | live heap MiB | vs baseline (peak RSS) | start s |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	base := d.api[apiKey{"memory", "baseline", n}]
	for _, impl := range impls {
		s := d.api[apiKey{"memory", impl, n}]
		if s == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", impl, s.runs, spread(s.get("peak-RSS-MiB"), "%.0f"), spread(s.get("live-heap-MiB"), "%.0f"),
			ratio(s.get("peak-RSS-MiB"), base.get("peak-RSS-MiB")), spread(s.get("start-s"), "%.1f"))
	}
	fmt.Fprintf(w, "\n| pass | implementation | runs | reads/ns | post/ns | put/ns | patch/ns | delete/ns | writes/ns | wall s | wall vs baseline |\n")
	fmt.Fprintf(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, pass := range passes {
		base := d.api[apiKey{pass, "baseline", n}]
		for _, impl := range impls {
			s := d.api[apiKey{pass, impl, n}]
			if s == nil {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", pass, impl, s.runs,
				spread(s.get("reads/ns"), "%.2f"), spread(s.get("post/ns"), "%.2f"), spread(s.get("put/ns"), "%.2f"),
				spread(s.get("patch/ns"), "%.2f"), spread(s.get("delete/ns"), "%.2f"), spread(s.get("writes/ns"), "%.2f"),
				spread(s.get("wall-s"), "%.2f"), ratio(s.get("wall-s"), base.get("wall-s")))
		}
	}
	var by []string
	for _, pass := range passes {
		for _, impl := range impls {
			if w, ok := d.writesBy[apiKey{pass, impl, n}]; ok && w != "" {
				by = append(by, fmt.Sprintf("| %s | %s | %s |", pass, impl, w))
			}
		}
	}
	if len(by) > 0 {
		fmt.Fprintf(w, "\nWrites per namespace by verb and resource (run 1; `PATCH namespaces` are label writes):\n\n| pass | implementation | writes/ns |\n| --- | --- | --- |\n%s\n", strings.Join(by, "\n"))
	}
	var names []string
	for _, impl := range impls {
		if inf := d.informers[impl]; inf != nil {
			names = append(names, fmt.Sprintf("- %s: %s", impl, strings.Join(inf, ", ")))
		}
	}
	if len(names) > 0 {
		fmt.Fprintf(w, "\nInformers each process opened (cluster-wide unless a label selector is shown):\n\n%s\n", strings.Join(names, "\n"))
	}
}
