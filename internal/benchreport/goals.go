package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The goals of issue #14, as numbers.
const (
	scaleN          = "10000" // the N the memory and change-pass goals are stated for
	maxPeakRSSMiB   = 300
	maxFirstWall    = 1.05 // × the baseline's median
	maxChangeWall   = 1.1  // × the baseline's median, at scaleN
	maxGenerateUs   = 5.0
	maxGenerateAllo = 60
	generateBench   = "FullSet/generate/ambient"
)

// verdict is one goal's outcome: met, not met, or not measured, with the numbers that decide it.
type verdict struct {
	goal, status, numbers string
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

const unmeasured = "not measured"

func writeGoals(w io.Writer, d *data) {
	vs := goals(d)
	fmt.Fprintf(w, "## Goals (issue #14)\n\nComputed from the numbers below; medians over the runs.\n\n| goal | status | numbers |\n| --- | --- | --- |\n")
	for _, v := range vs {
		fmt.Fprintf(w, "| %s | %s | %s |\n", v.goal, v.status, v.numbers)
	}
}

func goals(d *data) []verdict {
	var out []verdict
	scale := d.largest()
	atScale := func(goal string, decide func(n string) verdict) {
		if scale == "" {
			out = append(out, verdict{goal, unmeasured, "no API benchmark in the raw output"})
			return
		}
		v := decide(scale)
		v.goal = goal
		if scale != scaleN {
			v.numbers = fmt.Sprintf("no N=%s run; at N=%s it would be %s: %s", scaleN, scale, v.status, v.numbers)
			v.status = unmeasured
		}
		out = append(out, v)
	}
	atScale(fmt.Sprintf("peak RSS of the library at N=%s ≤ the baseline's and ≤ %d MiB", scaleN, maxPeakRSSMiB), func(n string) verdict {
		lib, base := d.median("memory", "library", n, "peak-RSS-MiB"), d.median("memory", "baseline", n, "peak-RSS-MiB")
		if lib == nil || base == nil {
			return verdict{status: unmeasured, numbers: "library or baseline missing"}
		}
		return verdict{status: met(*lib <= *base && *lib <= maxPeakRSSMiB), numbers: fmt.Sprintf("library %.0f MiB, baseline %.0f MiB", *lib, *base)}
	})
	// Issue #24's last goal: the memory of the onDemand controller, which caches every
	// EndpointSlice of the cluster (the clutter holds the notebooks' slices).
	atScale(fmt.Sprintf("peak RSS of the library with waypoints onDemand at N=%s, EndpointSlices in the clutter, ≤ the baseline's", scaleN), func(n string) verdict {
		lib, base := d.median("memory", "library-onDemand", n, "peak-RSS-MiB"), d.median("memory", "baseline", n, "peak-RSS-MiB")
		if lib == nil || base == nil {
			return verdict{status: unmeasured, numbers: "library-onDemand (BENCH_PROVISION=onDemand) or baseline missing"}
		}
		return verdict{status: met(*lib <= *base), numbers: fmt.Sprintf("library-onDemand %.0f MiB, baseline %.0f MiB", *lib, *base)}
	})
	out = append(out, everyN(d, "first pass: writes/ns ≤ the baseline's", func(n string) (bool, string, bool) {
		lib, base := d.median("first", "library", n, "writes/ns"), d.median("first", "baseline", n, "writes/ns")
		if lib == nil || base == nil {
			return false, "", false
		}
		return *lib <= *base, fmt.Sprintf("N=%s: library %.2f, baseline %.2f", n, *lib, *base), true
	}))
	out = append(out, everyN(d, fmt.Sprintf("first pass: wall ≤ %.2f× the baseline's (median)", maxFirstWall), func(n string) (bool, string, bool) {
		lib, base := d.median("first", "library", n, "wall-s"), d.median("first", "baseline", n, "wall-s")
		if lib == nil || base == nil || *base == 0 {
			return false, "", false
		}
		return *lib <= maxFirstWall**base, fmt.Sprintf("N=%s: %.2f×", n, *lib / *base), true
	}))
	atScale(fmt.Sprintf("change pass at N=%s: wall ≤ %.1f× the baseline's (median)", scaleN, maxChangeWall), func(n string) verdict {
		lib, base := d.median("change", "library", n, "wall-s"), d.median("change", "baseline", n, "wall-s")
		if lib == nil || base == nil || *base == 0 {
			return verdict{status: unmeasured, numbers: "library or baseline missing"}
		}
		return verdict{status: met(*lib <= maxChangeWall**base), numbers: fmt.Sprintf("%.2f× (library %.1f s, baseline %.1f s)", *lib / *base, *lib, *base)}
	})
	out = append(out, everyN(d, "steady state: 0 reads and 0 writes per namespace (library, every run)", func(n string) (bool, string, bool) {
		s := d.api[apiKey{"steady", "library", n}]
		if s == nil {
			return false, "", false
		}
		reads, writes := s.get("reads/ns").max(), s.get("writes/ns").max()
		return reads == 0 && writes == 0, fmt.Sprintf("N=%s: at most %.2f reads, %.2f writes", n, reads, writes), true
	}))
	out = append(out, generation(d))
	return out
}

// everyN decides a goal at every N measured: met when met at each.
func everyN(d *data, goal string, decide func(n string) (ok bool, numbers string, measured bool)) verdict {
	all, any := true, false
	var numbers []string
	for _, n := range d.ns {
		ok, nums, measured := decide(n)
		if !measured {
			continue
		}
		any = true
		all = all && ok
		numbers = append(numbers, nums)
	}
	if !any {
		return verdict{goal, unmeasured, "library or baseline missing"}
	}
	return verdict{goal, met(all), strings.Join(numbers, "; ")}
}

func generation(d *data) verdict {
	goal := fmt.Sprintf("generation of the full ambient set ≤ %.0f µs and ≤ %d allocs", maxGenerateUs, maxGenerateAllo)
	s := d.gen[generateBench]
	if s == nil {
		return verdict{goal, unmeasured, "no " + generateBench + " line"}
	}
	us, allocs := s.get("ns/op").median()/1000, s.get("allocs/op").median()
	return verdict{goal, met(us <= maxGenerateUs && allocs <= maxGenerateAllo), fmt.Sprintf("%.1f µs, %.0f allocs (%s)", us, allocs, generateBench)}
}

// median of one metric of one cell, or nil when the cell is missing.
func (d *data) median(pass, impl, n, unit string) *float64 {
	s := d.api[apiKey{pass, impl, n}]
	if s == nil || len(s.get(unit).vals) == 0 {
		return nil
	}
	v := s.get(unit).median()
	return &v
}

// largest is the largest N measured, "" when none.
func (d *data) largest() string {
	best, bestN := "", -1
	for _, n := range d.ns {
		if v, err := strconv.Atoi(n); err == nil && v > bestN {
			best, bestN = n, v
		}
	}
	return best
}
