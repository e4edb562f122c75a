package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
	"github.com/kubeflow-ambient/profile-plugins/plugin/profilev1"
)

// Workers is the concurrency of every implementation, like MaxConcurrentReconciles.
const Workers = 4

func TestMain(m *testing.M) { envtest.Main(m) }

// profiles is N, from BENCH_PROFILES (default 10, which `make test` uses; `make bench` 1000).
func profiles(b *testing.B) int {
	n := 10
	if v := os.Getenv("BENCH_PROFILES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("BENCH_PROFILES=%q: want a positive number", v)
		}
	}
	return n
}

// world is the API server with a shared informer cache, as a manager has.
type world struct {
	base   client.Client // uncounted, for setup
	cached client.Client // counted writes, cached reads
	direct client.Reader // counted reads past the cache, as a manager's GetAPIReader()
	count  *envtest.Counter
	cache  cache.Cache
	scheme *runtime.Scheme
}

func newWorld(b *testing.B) *world {
	env := envtest.Start(b)
	s := plugin.NewScheme()
	c, err := cache.New(env.Base, cache.Options{Scheme: s})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	// Every type read through the cache, informed before any measurement.
	for _, obj := range watched() {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	counted, count := envtest.CountRequests(env.Base)
	cc, err := client.New(counted, client.Options{Scheme: s, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		b.Fatal(err)
	}
	base, err := client.New(env.Base, client.Options{Scheme: s})
	if err != nil {
		b.Fatal(err)
	}
	direct, err := client.New(counted, client.Options{Scheme: s})
	if err != nil {
		b.Fatal(err)
	}
	return &world{base: base, cached: cc, direct: direct, count: count, cache: c, scheme: s}
}

func watched() []client.Object {
	ps, err := plugins.New(config.Default())
	if err != nil {
		panic(err)
	}
	return append([]client.Object{&corev1.Namespace{}, &corev1.Pod{}}, kindsAsObjects(ps)...)
}

// kindsAsObjects turns the plugins' list types into their item types.
func kindsAsObjects(ps []plugin.Plugin) []client.Object {
	s := plugin.NewScheme()
	var out []client.Object
	for _, p := range ps {
		for _, l := range p.Kinds() {
			if meta, ok := l.(*metav1.PartialObjectMetadataList); ok {
				// A kind read as metadata only: its informer holds metadata too.
				item := &metav1.PartialObjectMetadata{}
				item.SetGroupVersionKind(meta.GroupVersionKind().GroupVersion().WithKind(strings.TrimSuffix(meta.Kind, "List")))
				out = append(out, item)
				continue
			}
			gvks, _, err := s.ObjectKinds(l)
			if err != nil {
				panic(err)
			}
			item, err := s.New(gvks[0].GroupVersion().WithKind(strings.TrimSuffix(gvks[0].Kind, "List")))
			if err != nil {
				panic(err)
			}
			out = append(out, item.(client.Object))
		}
	}
	return out
}

// settle waits until the cache holds what the API server holds for the watched types, so the
// next phase observes the previous one's writes, as it would a moment later in a controller.
func (w *world) settle(b *testing.B) {
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	for _, obj := range watched() {
		gvk, err := w.cached.GroupVersionKindFor(obj)
		if err != nil {
			b.Fatal(err)
		}
		listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		newList := func() runtime.Object {
			if _, metadataOnly := obj.(*metav1.PartialObjectMetadata); metadataOnly {
				l := &metav1.PartialObjectMetadataList{}
				l.SetGroupVersionKind(listGVK)
				return l
			}
			l, _ := w.scheme.New(listGVK)
			return l
		}
		for {
			direct, cached := newList(), newList()
			if err := w.base.List(ctx, direct.(client.ObjectList)); err != nil {
				b.Fatal(err)
			}
			if err := w.cache.List(ctx, cached.(client.ObjectList)); err != nil {
				b.Fatal(err)
			}
			if versions(direct) == versions(cached) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("cache of %s did not catch up", gvk.Kind)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// versions maps every object of a list to its resourceVersion, encoded for comparison.
func versions(list runtime.Object) string {
	items, _ := metaItems(list)
	m := map[string]string{}
	for _, o := range items {
		m[o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
	}
	data, _ := json.Marshal(m)
	return string(data)
}

// implementation applies the desired state of one namespace.
type implementation func(ctx context.Context, w *world, cfg *config.Config, ns string) error

func library(ctx context.Context, w *world, cfg *config.Config, ns string) error {
	ps, err := plugins.New(cfg)
	if err != nil {
		return err
	}
	r, err := plugin.NewRunner(w.cached, ps...)
	if err != nil {
		return err
	}
	r.APIReader = w.direct // as the README wires it: pods and hidden names past the cache
	return r.Apply(ctx, profileOf(ns)).Err()
}

func profileOf(ns string) *profilev1.Profile {
	return &profilev1.Profile{
		ObjectMeta: metav1.ObjectMeta{Name: ns, UID: types.UID("uid-" + ns)},
		Spec:       profilev1.ProfileSpec{Owner: fixture.User(ns + "@example.com")},
	}
}

// desired is what every implementation writes: the plugins' rendering, owner references included.
func desired(w *world, cfg *config.Config, ns string) ([]client.Object, map[string]string, error) {
	ps, err := plugins.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	p := profileOf(ns)
	r, err := plugin.Render(w.scheme, ps, plugin.Target{Namespace: ns, Owner: p.Spec.Owner.Name, Profile: p})
	if err != nil {
		return nil, nil, err
	}
	var objs []client.Object
	for _, u := range r.Objects {
		typed, err := w.scheme.New(u.GroupVersionKind())
		if err != nil {
			return nil, nil, err
		}
		data, err := json.Marshal(u.Object)
		if err != nil {
			return nil, nil, err
		}
		if err := json.Unmarshal(data, typed); err != nil {
			return nil, nil, err
		}
		objs = append(objs, typed.(client.Object))
	}
	return objs, r.Namespace.GetLabels(), nil
}

// baseline is the profiles controller's pattern: cached Get, Create when missing, compare the
// fields it sets, Update when they differ; the same for the namespace's labels.
func baseline(ctx context.Context, w *world, cfg *config.Config, ns string) error {
	objs, labels, err := desired(w, cfg, ns)
	if err != nil {
		return err
	}
	for _, want := range objs {
		found := want.DeepCopyObject().(client.Object)
		err := w.cached.Get(ctx, client.ObjectKeyFromObject(want), found)
		if apierrors.IsNotFound(err) {
			if err := w.cached.Create(ctx, want.DeepCopyObject().(client.Object)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if same(found, want) {
			continue
		}
		update := want.DeepCopyObject().(client.Object)
		update.SetResourceVersion(found.GetResourceVersion())
		if err := w.cached.Update(ctx, update); err != nil {
			return err
		}
	}
	n := &corev1.Namespace{}
	if err := w.cached.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		return err
	}
	changed := false
	for k, v := range labels {
		if n.Labels[k] != v {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[k] = v
			changed = true
		}
	}
	if changed {
		return w.cached.Update(ctx, n)
	}
	return nil
}

// same compares what the baseline sets: labels, annotations and the spec (or data), each as a
// subset, since the API server adds defaults.
func same(found, want client.Object) bool {
	f, w := jsonMap(found), jsonMap(want)
	for _, key := range []string{"spec", "data"} {
		if !subset(f[key], w[key]) {
			return false
		}
	}
	fm, _ := f["metadata"].(map[string]any)
	wm, _ := w["metadata"].(map[string]any)
	return subset(fm["labels"], wm["labels"]) && subset(fm["annotations"], wm["annotations"])
}

func jsonMap(o any) map[string]any {
	data, _ := json.Marshal(o)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return m
}

func subset(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return len(w) == 0
		}
		for k, v := range w {
			if !subset(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !subset(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

// floor writes the same objects with no reads at all: one Create each and one label patch.
func floor(ctx context.Context, w *world, cfg *config.Config, ns string) error {
	objs, labels, err := desired(w, cfg, ns)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := w.cached.Create(ctx, o); err != nil {
			return err
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	return w.cached.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, patch))
}

// run applies impl to every namespace with Workers goroutines and reports requests per namespace.
func (w *world) run(b *testing.B, impl implementation, cfg *config.Config, nss []string) {
	if b.N != 1 {
		b.Fatalf("the API benchmark measures one pass; run it with -benchtime=1x (b.N=%d)", b.N)
	}
	before := w.count.Snapshot()
	work := make(chan string)
	errs := make(chan error, len(nss))
	var wg sync.WaitGroup
	start := time.Now()
	for range Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ns := range work {
				if err := impl(context.Background(), w, cfg, ns); err != nil {
					errs <- fmt.Errorf("%s: %w", ns, err)
				}
			}
		}()
	}
	for _, ns := range nss {
		work <- ns
	}
	close(work)
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	after := w.count.Snapshot()
	n := float64(len(nss))
	writes := 0
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		d := after[m] - before[m]
		writes += d
		b.ReportMetric(float64(d)/n, strings.ToLower(m)+"/ns")
	}
	b.ReportMetric(float64(after[http.MethodGet]-before[http.MethodGet])/n, "reads/ns")
	b.ReportMetric(float64(writes)/n, "writes/ns")
	b.ReportMetric(wall.Seconds(), "wall-s")
	w.settle(b)
}

func namespaces(b *testing.B, w *world, prefix string, n int) []string {
	var out []string
	for i := range n {
		ns := fmt.Sprintf("%s-%05d", prefix, i)
		// Annotated as the profiles controller does, so the runner accepts it as the Profile's.
		err := w.base.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Annotations: map[string]string{plugin.OwnerAnnotation: ns + "@example.com"}}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
		out = append(out, ns)
	}
	return out
}

// BenchmarkAPI counts the requests and wall time of N namespaces through three passes: the first
// reconcile, a steady-state reconcile with nothing changed, and a configuration change that
// touches one field of one object kind (the user-id header of the owner policy). The library,
// a baseline in the profiles controller's style and a floor of plain creates write the same
// objects with the same concurrency.
func BenchmarkAPI(b *testing.B) {
	w := newWorld(b)
	n := profiles(b)
	cfg := config.Default()
	changed := config.Default()
	changed.Authorization.UserIDHeader = "x-kubeflow-user"

	impls := []struct {
		name string
		impl implementation
	}{{"library", library}, {"baseline", baseline}, {"floor", floor}}
	for _, im := range impls {
		nss := namespaces(b, w, im.name, n)
		w.settle(b)
		b.Run(fmt.Sprintf("first/%s/N=%d", im.name, n), func(b *testing.B) { w.run(b, im.impl, cfg, nss) })
		if im.name == "floor" {
			continue // a floor has nothing to compare and so no steady state
		}
		b.Run(fmt.Sprintf("steady/%s/N=%d", im.name, n), func(b *testing.B) { w.run(b, im.impl, cfg, nss) })
		b.Run(fmt.Sprintf("change/%s/N=%d", im.name, n), func(b *testing.B) { w.run(b, im.impl, changed, nss) })
	}
	if rss, ok := peakRSS(); ok {
		b.Run(fmt.Sprintf("peak-rss/N=%d", n), func(b *testing.B) { b.ReportMetric(rss, "peak-RSS-MiB") })
	}
}

// peakRSS is this process's peak resident memory (VmHWM), in MiB.
func peakRSS() (float64, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024, err == nil
		}
	}
	return 0, false
}
