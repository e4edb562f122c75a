package proc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// The implementations a Spec may name.
const (
	Library  = "library"
	Baseline = "baseline"
	Floor    = "floor"
)

// The passes, in the order they run.
const (
	// First reconciles namespaces that hold nothing of the plugins yet.
	First = "first"
	// Steady reconciles them again with nothing changed.
	Steady = "steady"
	// Change reconciles them after an edit that changes one object per namespace.
	Change = "change"
)

// Spec is what the benchmark asks of one process.
type Spec struct {
	Impl       string   `json:"impl"`
	Kubeconfig string   `json:"kubeconfig"`
	Namespaces []string `json:"namespaces"`
	Passes     []string `json:"passes"`
	// Workers reconcile namespaces at once, like MaxConcurrentReconciles.
	Workers int `json:"workers"`
	// QPS and Burst of the process's client; the same for every implementation.
	QPS   float32 `json:"qps"`
	Burst int     `json:"burst"`
	// Provision is the library's waypoint provisioning (config's mesh.waypoint.provision): empty
	// for the default (always); onDemand makes it watch and cache every EndpointSlice. The
	// baseline and the floor have no waypoints on demand and ignore it.
	Provision config.WaypointProvision `json:"provision,omitempty"`
}

// Config is the configuration of a pass: the default, with the Spec's provisioning, and in the
// change pass a different user-id header, so that exactly one object per namespace (the owner
// policy) changes.
func (s Spec) Config(pass string) *config.Config {
	cfg := config.Default()
	if s.Provision != "" {
		cfg.Mesh.Waypoint.Provision = s.Provision
	}
	if pass == Change {
		cfg.Authorization.UserIDHeader = "x-kubeflow-user"
	}
	return cfg
}

// Report is what one process measured.
type Report struct {
	Impl   string       `json:"impl"`
	Passes []PassReport `json:"passes"`
	// Informers are the resources the process watched (one informer each), "(metadata)" marking
	// metadata-only ones, sorted.
	Informers []string `json:"informers"`
	// StartSeconds is the time from start to synced informers, before the first pass.
	StartSeconds float64 `json:"startSeconds"`
	// PeakRSSMiB is VmHWM after the passes; LiveHeapMiB the heap in use after a forced GC, with
	// the caches still held.
	PeakRSSMiB  float64 `json:"peakRSSMiB"`
	LiveHeapMiB float64 `json:"liveHeapMiB"`
}

// PassReport is one pass over every namespace.
type PassReport struct {
	Name string `json:"name"`
	// Requests counts the requests sent during the pass by verb: GET (a Get), LIST, POST, PUT,
	// PATCH, DELETE. Informers' watches are not requests of a pass.
	Requests map[string]int `json:"requests"`
	// Writes counts the writes of the pass by verb and resource, "PATCH namespaces" for one.
	WritesBy    map[string]int `json:"writesBy"`
	WallSeconds float64        `json:"wallSeconds"`
	// Errors are the first few namespaces whose reconcile failed, and how.
	Errors []string `json:"errors,omitempty"`
}

// Reads is the number of GET and LIST requests of the pass.
func (p PassReport) Reads() int { return p.Requests["GET"] + p.Requests["LIST"] }

// Writes is the number of POST, PUT, PATCH and DELETE requests of the pass.
func (p PassReport) Writes() int {
	return p.Requests[http.MethodPost] + p.Requests[http.MethodPut] + p.Requests[http.MethodPatch] + p.Requests[http.MethodDelete]
}

// Main runs the Spec in the file at specPath and writes the Report as JSON to reportPath. It
// returns the process's exit code.
func Main(specPath, reportPath string) int {
	data, err := os.ReadFile(specPath)
	if err == nil {
		var spec Spec
		if err = json.Unmarshal(data, &spec); err == nil {
			var rep *Report
			if rep, err = Run(context.Background(), spec); err == nil {
				data, _ = json.Marshal(rep)
				err = os.WriteFile(reportPath, data, 0o600)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench process:", err)
		return 1
	}
	return 0
}

// Run starts the implementation the Spec names, runs its passes and measures them.
func Run(ctx context.Context, spec Spec) (*Report, error) {
	restCfg, err := clientcmd.BuildConfigFromFlags("", spec.Kubeconfig)
	if err != nil {
		return nil, err
	}
	restCfg.QPS, restCfg.Burst = spec.QPS, spec.Burst
	counted, count := countRequests(restCfg)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	start := time.Now()
	impl, err := start1(ctx, spec, counted)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", spec.Impl, err)
	}
	rep := &Report{Impl: spec.Impl, StartSeconds: time.Since(start).Seconds()}
	for _, pass := range spec.Passes {
		cfg := spec.Config(pass)
		pr, err := runPass(ctx, impl, cfg, pass, spec, count)
		if err != nil {
			return nil, err
		}
		rep.Passes = append(rep.Passes, pr)
		if len(pr.Errors) > 0 {
			break // the next pass would measure the failure's aftermath
		}
		if err := impl.settle(ctx); err != nil {
			return nil, fmt.Errorf("after the %s pass: %w", pass, err)
		}
	}
	rep.Informers = count.watched()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.LiveHeapMiB = float64(ms.HeapAlloc) / (1 << 20)
	rep.PeakRSSMiB, err = peakRSS()
	return rep, err
}

// implementation reconciles one namespace at a time and can wait until what it wrote is in its
// own cache.
type implementation interface {
	reconcile(ctx context.Context, cfg *config.Config, ns string) error
	// settle waits until the implementation's reads see its writes, as a controller's next
	// reconcile would a moment later.
	settle(ctx context.Context) error
}

func start1(ctx context.Context, spec Spec, cfg *rest.Config) (implementation, error) {
	switch name := spec.Impl; name {
	case Library:
		return startLibrary(ctx, cfg, spec.Config(First))
	case Baseline:
		return startBaseline(ctx, cfg)
	case Floor:
		return startFloor(cfg)
	}
	return nil, fmt.Errorf("impl %q: want %s, %s or %s", spec.Impl, Library, Baseline, Floor)
}

const maxErrors = 5

func runPass(ctx context.Context, impl implementation, cfg *config.Config, pass string, spec Spec, count *counter) (PassReport, error) {
	before, beforeWrites := count.snapshot()
	work := make(chan string)
	var (
		mu   sync.Mutex
		errs []string
		wg   sync.WaitGroup
	)
	began := time.Now()
	for range max(spec.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ns := range work {
				if err := impl.reconcile(ctx, cfg, ns); err != nil {
					mu.Lock()
					if len(errs) < maxErrors {
						errs = append(errs, ns+": "+err.Error())
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, ns := range spec.Namespaces {
		work <- ns
	}
	close(work)
	wg.Wait()
	wall := time.Since(began)
	after, afterWrites := count.snapshot()
	return PassReport{Name: pass, Requests: minus(after, before), WritesBy: minus(afterWrites, beforeWrites),
		WallSeconds: wall.Seconds(), Errors: errs}, ctx.Err()
}

func minus(after, before map[string]int) map[string]int {
	delta := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			delta[k] = d
		}
	}
	return delta
}

// peakRSS is this process's peak resident memory (VmHWM), in MiB.
func peakRSS() (float64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}
