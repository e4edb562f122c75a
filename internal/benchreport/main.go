// Command benchreport turns raw `go test -bench` output into BENCHMARKS.md: the machine, the date,
// the command, a table of generation costs, the API benchmark with the library side by side with
// the baseline and the floor, and the raw output (benchstat reads it as it is).
//
//	go run ./internal/benchreport -command "make bench" bench.txt [scale.txt] > BENCHMARKS.md
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
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: benchreport [-command CMD] RAW...")
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
	if err := write(os.Stdout, *command, raws); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// result is one benchmark line: name and unit -> value.
type result struct {
	name    string
	metrics map[string]float64
}

// benchstatLine keeps the configuration and result lines and drops log noise.
var benchstatLine = regexp.MustCompile(`^((goos|goarch|pkg|cpu): |Benchmark|PASS$|ok )`)

var line = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)

func parse(raw string) []result {
	var out []result
	sc := bufio.NewScanner(strings.NewReader(raw))
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

// median of each metric over repeated runs (-count), by benchmark name, in first-seen order.
func medians(rs []result) []result {
	var order []string
	byName := map[string][]result{}
	for _, r := range rs {
		if _, ok := byName[r.name]; !ok {
			order = append(order, r.name)
		}
		byName[r.name] = append(byName[r.name], r)
	}
	var out []result
	for _, name := range order {
		m := map[string]float64{}
		for unit := range byName[name][0].metrics {
			var vs []float64
			for _, r := range byName[name] {
				vs = append(vs, r.metrics[unit])
			}
			sort.Float64s(vs)
			m[unit] = vs[len(vs)/2]
		}
		out = append(out, result{name: name, metrics: m})
	}
	return out
}

func write(w io.Writer, command string, raws []string) error {
	goVersion := runtime.Version()
	if out, err := exec.Command("go", "version").Output(); err == nil {
		goVersion = strings.TrimSpace(string(out))
	}
	cpu := ""
	for _, raw := range raws {
		for _, l := range strings.Split(raw, "\n") {
			if c, ok := strings.CutPrefix(l, "cpu: "); ok {
				cpu = strings.TrimSpace(c)
			}
		}
	}
	fmt.Fprintf(w, "# Benchmarks\n\nMeasured on %s. Machine: %d cores (`nproc`), %s, %s.\n\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), cpu, goVersion)
	fmt.Fprintf(w, "Reproduce with `%s` (it takes minutes: the API benchmark creates thousands of objects in a\nreal API server). Numbers are medians over the runs in the raw output below.\n\n", command)

	var all []result
	for _, raw := range raws {
		all = append(all, medians(parse(raw))...)
	}

	fmt.Fprintf(w, "## Generation, per namespace\n\nTargets for the full set: at most 50 µs and 500 allocations per namespace.\n\n")
	fmt.Fprintf(w, "| benchmark | µs/op | B/op | allocs/op |\n| --- | ---: | ---: | ---: |\n")
	for _, r := range all {
		if strings.HasPrefix(r.name, "BenchmarkAPI") {
			continue
		}
		fmt.Fprintf(w, "| %s | %.1f | %.0f | %.0f |\n", strings.TrimPrefix(r.name, "Benchmark"), r.metrics["ns/op"]/1000, r.metrics["B/op"], r.metrics["allocs/op"])
	}

	type key struct{ phase, n string }
	api := map[key]map[string]result{}
	var keys []key
	rss := map[string]float64{}
	for _, r := range all {
		parts := strings.Split(strings.TrimPrefix(r.name, "BenchmarkAPI/"), "/")
		if !strings.HasPrefix(r.name, "BenchmarkAPI/") {
			continue
		}
		if parts[0] == "peak-rss" && len(parts) == 2 {
			rss[parts[1]] = r.metrics["peak-RSS-MiB"]
			continue
		}
		if len(parts) != 3 {
			continue
		}
		k := key{parts[0], parts[2]}
		if api[k] == nil {
			api[k] = map[string]result{}
			keys = append(keys, k)
		}
		api[k][parts[1]] = r
	}
	if len(keys) > 0 {
		fmt.Fprintf(w, "\n## API requests per namespace\n\n")
		fmt.Fprintf(w, "Each pass reconciles N namespaces with %s workers. *library* is this module's runner; *baseline* is the\nprofiles controller's pattern (cached Get, Create or compare-and-Update per object, the same for the\nnamespace's labels) writing the same objects; *floor* creates them with no reads. Reads go to an informer\ncache, so `reads/ns` counts only requests that reached the API server.\n\n", "4")
		fmt.Fprintf(w, "| pass | N | implementation | reads/ns | post/ns | put/ns | patch/ns | delete/ns | writes/ns | wall s | wall vs baseline | wall vs floor |\n")
		fmt.Fprintf(w, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, k := range keys {
			base, hasBase := api[k]["baseline"]
			flo, hasFloor := api[key{"first", k.n}]["floor"]
			for _, impl := range []string{"library", "baseline", "floor"} {
				r, ok := api[k][impl]
				if !ok {
					continue
				}
				m := r.metrics
				ratio := func(other result, has bool) string {
					if !has || other.metrics["wall-s"] == 0 || (k.phase != "first" && other.name == flo.name) {
						return "-"
					}
					return fmt.Sprintf("%.2f×", m["wall-s"]/other.metrics["wall-s"])
				}
				fmt.Fprintf(w, "| %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n",
					k.phase, strings.TrimPrefix(k.n, "N="), impl, m["reads/ns"], m["post/ns"], m["put/ns"], m["patch/ns"], m["delete/ns"], m["writes/ns"], m["wall-s"],
					ratio(base, hasBase), ratio(flo, hasFloor && k.phase == "first"))
			}
		}
	}
	if len(rss) > 0 {
		fmt.Fprintf(w, "\nPeak resident memory of the benchmark process (library, baseline and floor side, informer cache included; not the API server):\n\n")
		for _, n := range sortedKeys(rss) {
			fmt.Fprintf(w, "- %s: %.0f MiB\n", n, rss[n])
		}
	}
	fmt.Fprintf(w, "\n## Raw output\n\nThe lines benchstat reads, as `go test` printed them.\n\n```\n")
	for _, raw := range raws {
		for _, l := range strings.Split(raw, "\n") {
			if benchstatLine.MatchString(l) {
				fmt.Fprintln(w, l)
			}
		}
	}
	fmt.Fprintf(w, "```\n")
	return nil
}

func sortedKeys(m map[string]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
