package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/bench/clutter"
	"github.com/kubeflow-ambient/profile-plugins/internal/bench/proc"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Workers is the concurrency of every implementation, like MaxConcurrentReconciles.
const Workers = 4

// A benchmark process is this test binary run again with these variables set: the file holding
// its proc.Spec and the file to write its proc.Report to.
const (
	procSpecEnv   = "BENCH_PROC_SPEC"
	procReportEnv = "BENCH_PROC_REPORT"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(procSpecEnv); spec != "" {
		log.SetLogger(logr.Discard())
		os.Exit(proc.Main(spec, os.Getenv(procReportEnv)))
	}
	envtest.Main(m)
}

// knobs are the benchmark's environment variables.
type knobs struct {
	n       int      // BENCH_PROFILES: namespaces (default 10, which `make test` uses)
	runs    int      // BENCH_RUNS: rotated runs (default 3)
	impls   []string // BENCH_IMPLS: comma-separated (default library,baseline; floor may be added)
	clutter bool     // BENCH_CLUTTER: 0 leaves the namespaces empty (default 1)
	// BENCH_PROVISION: the library's waypoint provisioning (default: config's, always); with
	// onDemand the library caches every EndpointSlice and is reported as library-onDemand.
	provision config.WaypointProvision
}

func readKnobs(b *testing.B) knobs {
	k := knobs{n: 10, runs: 3, impls: []string{proc.Library, proc.Baseline}, clutter: true}
	positive := func(name string, into *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				b.Fatalf("%s=%q: want a positive number", name, v)
			}
			*into = n
		}
	}
	positive("BENCH_PROFILES", &k.n)
	positive("BENCH_RUNS", &k.runs)
	if v := os.Getenv("BENCH_IMPLS"); v != "" {
		k.impls = strings.Split(v, ",")
		for _, impl := range k.impls {
			if impl != proc.Library && impl != proc.Baseline && impl != proc.Floor {
				b.Fatalf("BENCH_IMPLS=%q: %q is not one of %s, %s, %s", v, impl, proc.Library, proc.Baseline, proc.Floor)
			}
		}
	}
	k.clutter = os.Getenv("BENCH_CLUTTER") != "0"
	switch v := config.WaypointProvision(os.Getenv("BENCH_PROVISION")); v {
	case "", config.ProvisionAlways, config.ProvisionOnDemand:
		k.provision = v
	default:
		b.Fatalf("BENCH_PROVISION=%q: want %s or %s", v, config.ProvisionAlways, config.ProvisionOnDemand)
	}
	return k
}

// BenchmarkAPI runs each implementation in a process of its own against N namespaces holding
// clutter (package clutter), through three passes: the first reconcile, a steady one with nothing
// changed, and a change of one object per namespace (proc.Changed). It repeats that BENCH_RUNS
// times with the implementations in rotated order (run 1: library, baseline; run 2: baseline,
// library; ...), so neither always runs on a warmer or a more tired API server.
//
// Every process starts on fresh state: the namespaces and their clutter stay (creating them is
// the slow part, and both implementations then cache the same clutter), and what the previous
// process wrote is taken away before the next starts (reset, not counted). Separate namespace
// sets would multiply the clutter by the number of processes.
func BenchmarkAPI(b *testing.B) {
	if b.N != 1 {
		b.Fatalf("the API benchmark measures one pass; run it with -benchtime=1x (b.N=%d)", b.N)
	}
	k := readKnobs(b)
	envtest.ForScale()
	env := envtest.Start(b)
	ctx := context.Background()
	setup, err := client.New(unthrottled(env.Base), client.Options{Scheme: envtest.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig := writeKubeconfig(b, env.Base)

	began := time.Now()
	nss, objects := createNamespaces(ctx, b, setup, k)
	took := time.Since(began)
	b.Run(fmt.Sprintf("clutter/N=%d", k.n), func(b *testing.B) {
		b.ReportMetric(float64(objects), "objects")
		b.ReportMetric(took.Seconds(), "wall-s")
		b.ReportMetric(float64(objects)/took.Seconds(), "objects/s")
	})

	dirty := false
	for run := 1; run <= k.runs; run++ {
		for pos, impl := range rotate(k.impls, run-1) {
			if dirty {
				began := time.Now()
				if err := reset(ctx, setup, nss); err != nil {
					b.Fatalf("resetting before %s, run %d: %v", impl, run, err)
				}
				fmt.Printf("reset before %s run=%d: %.1fs\n", impl, run, time.Since(began).Seconds())
			}
			dirty = true
			passes := []string{proc.First, proc.Steady, proc.Change}
			if impl == proc.Floor {
				passes = passes[:1] // it cannot tell a second pass from the first
			}
			spec := proc.Spec{Impl: impl, Kubeconfig: kubeconfig, Namespaces: nss, Passes: passes,
				Workers: Workers, QPS: 1000, Burst: 2000}
			if impl == proc.Library {
				spec.Provision = k.provision
			}
			rep := launch(ctx, b, spec)
			if spec.Provision == config.ProvisionOnDemand {
				rep.Impl = proc.Library + "-" + string(config.ProvisionOnDemand)
			}
			record(b, rep, k.n, run, pos+1)
		}
	}
}

// record reports one process's passes and memory as benchmark lines, and fails the benchmark when
// a pass failed or the steady pass was not free.
func record(b *testing.B, rep *proc.Report, n, run, position int) {
	fmt.Printf("informers %s run=%d: %s\n", rep.Impl, run, strings.Join(rep.Informers, ", "))
	for _, p := range rep.Passes {
		var by []string
		for _, k := range slices.Sorted(maps.Keys(p.WritesBy)) {
			by = append(by, fmt.Sprintf("%s %.2f", k, float64(p.WritesBy[k])/float64(n)))
		}
		fmt.Printf("writes/ns %s %s run=%d N=%d: %s\n", rep.Impl, p.Name, run, n, strings.Join(by, ", "))
		b.Run(fmt.Sprintf("%s/%s/run=%d/N=%d", p.Name, rep.Impl, run, n), func(b *testing.B) {
			per := func(v int) float64 { return float64(v) / float64(n) }
			for _, verb := range []string{"GET", "LIST", http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
				b.ReportMetric(per(p.Requests[verb]), strings.ToLower(verb)+"/ns")
			}
			b.ReportMetric(per(p.Reads()), "reads/ns")
			b.ReportMetric(per(p.Writes()), "writes/ns")
			b.ReportMetric(p.WallSeconds, "wall-s")
			b.ReportMetric(float64(position), "position")
		})
		if len(p.Errors) > 0 {
			b.Fatalf("%s, %s pass, run %d: %s", rep.Impl, p.Name, run, strings.Join(p.Errors, "; "))
		}
		if p.Name == proc.Steady && (p.Writes() != 0 || p.Reads() != 0) {
			b.Fatalf("%s, steady pass, run %d: %d writes and %d reads with nothing changed (%v), want none",
				rep.Impl, run, p.Writes(), p.Reads(), p.Requests)
		}
	}
	b.Run(fmt.Sprintf("memory/%s/run=%d/N=%d", rep.Impl, run, n), func(b *testing.B) {
		b.ReportMetric(rep.PeakRSSMiB, "peak-RSS-MiB")
		b.ReportMetric(rep.LiveHeapMiB, "live-heap-MiB")
		b.ReportMetric(rep.StartSeconds, "start-s")
	})
	if rep.PeakRSSMiB <= 0 || rep.LiveHeapMiB <= 0 {
		b.Fatalf("%s, run %d: no memory measured: %+v", rep.Impl, run, rep)
	}
}

func rotate(s []string, by int) []string {
	by %= len(s)
	return append(slices.Clone(s[by:]), s[:by]...)
}

// unthrottled is cfg without client-side rate limiting, for the benchmark's own setup.
func unthrottled(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// writeKubeconfig writes cfg where a benchmark process reads it.
func writeKubeconfig(b *testing.B, cfg *rest.Config) string {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["bench"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	kc.CurrentContext = "bench"
	path := filepath.Join(b.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// setupWorkers create and reset objects at once; the API server, not the client, sets the pace.
const setupWorkers = 16

// createNamespaces makes n namespaces, annotated for their Profile as the profiles controller
// annotates them, each with its clutter, and returns their names and the number of objects made.
func createNamespaces(ctx context.Context, b *testing.B, c client.Client, k knobs) ([]string, int) {
	nss := make([]string, k.n)
	for i := range nss {
		nss[i] = fmt.Sprintf("team-%05d", i)
	}
	var made atomic.Int64
	err := parallel(nss, func(ns string) error {
		objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Annotations: map[string]string{ownership.OwnerAnnotation: proc.Owner(ns)}}}}
		if k.clutter {
			objs = append(objs, clutter.Objects(ns, proc.Owner(ns))...)
		}
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating %T %s/%s: %w", o, ns, o.GetName(), err)
			}
			made.Add(1)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return nss, int(made.Load())
}

// reset takes away what an implementation wrote: the objects carrying the plugins' managed-by
// label (the baseline and the floor write the same labels) and every namespace label but the
// API server's own, which also drops the field managers that owned them.
func reset(ctx context.Context, c client.Client, nss []string) error {
	kinds, err := managedKinds(c)
	if err != nil {
		return err
	}
	var doomed []*metav1.PartialObjectMetadata
	for _, gvk := range kinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, client.MatchingLabels{plugin.ManagedByLabel: plugin.ManagedByValue}); err != nil {
			return err
		}
		for i := range list.Items {
			it := &list.Items[i]
			it.SetGroupVersionKind(gvk)
			doomed = append(doomed, it)
		}
	}
	err = parallel(doomed, func(o *metav1.PartialObjectMetadata) error {
		return client.IgnoreNotFound(c.Delete(ctx, o))
	})
	if err != nil {
		return err
	}
	return parallel(nss, func(ns string) error {
		n := &metav1.PartialObjectMetadata{}
		n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			return err
		}
		drop := map[string]any{}
		for key := range n.Labels {
			if key != corev1.LabelMetadataName {
				drop[key] = nil
			}
		}
		if len(drop) == 0 {
			return nil
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": drop}})
		if err != nil {
			return err
		}
		return c.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch))
	})
}

// managedKinds are the kinds the plugins write with either configuration, from a rendering.
func managedKinds(c client.Client) ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for _, cfg := range []*config.Config{config.Default(), proc.Spec{}.Config(proc.Change)} {
		ps, err := plugins.New(cfg)
		if err != nil {
			return nil, err
		}
		r, err := runner.Render(c.Scheme(), ps, plugin.Target{Namespace: "x", Owner: "x@example.com"})
		if err != nil {
			return nil, err
		}
		for _, o := range r.Objects {
			if gvk := o.GroupVersionKind(); !slices.Contains(out, gvk) {
				out = append(out, gvk)
			}
		}
	}
	return out, nil
}

// parallel runs do for every item with setupWorkers goroutines and returns the first error.
func parallel[T any](items []T, do func(T) error) error {
	work := make(chan T)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range setupWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				if err := do(it); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	return first
}

// launch runs one benchmark process for spec and returns its report. A process gets ten minutes
// plus 100 ms per namespace, far more than its passes take.
func launch(ctx context.Context, b *testing.B, spec proc.Spec) *proc.Report {
	dir := b.TempDir()
	specPath, reportPath := filepath.Join(dir, "spec.json"), filepath.Join(dir, "report.json")
	data, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute+time.Duration(len(spec.Namespaces))*100*time.Millisecond)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), procSpecEnv+"="+specPath, procReportEnv+"="+reportPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (timed out)", err)
		}
		b.Fatalf("%s process: %v\n%s", spec.Impl, err, tail(out.String(), 4000))
	}
	data, err = os.ReadFile(reportPath)
	if err != nil {
		b.Fatalf("%s process wrote no report: %v\n%s", spec.Impl, err, tail(out.String(), 4000))
	}
	rep := &proc.Report{}
	if err := json.Unmarshal(data, rep); err != nil {
		b.Fatal(err)
	}
	return rep
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
