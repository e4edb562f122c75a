package integration

// Attack review of Dec 1, finding B, on the real API server: ConfigMaps labelled only
// app.kubernetes.io/managed-by=profile-plugins entered the controller's cache whole, so one tenant
// could grow the shared controller's memory until it was OOM-killed (120 of 900 KB took it from
// 40 MB to 183 MB RSS). Now the cache keeps of each only what plugin.TrimConfigMap keeps.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// startManager starts a manager with the plugins' cache options on restCfg and stops it when the
// test ends.
func startManager(t *testing.T, restCfg *rest.Config) manager.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{Scheme: envtest.NewScheme(), Cache: profileplugins.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx))
	return mgr
}

// A tenant creates 120 ConfigMaps of 900 KB labelled managed-by=profile-plugins (and with the
// waypoint plugin's label, and big annotations) in a namespace. The manager's cache selects them
// all, and holds of each a few hundred bytes: its name, UID, the two managed labels and nothing of
// the 108 MB they store. Measured on the cached objects, not on the process, so the bound is exact.
func TestATenantsLabelledConfigMapsCostTheCacheAlmostNothingOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	const ns, count, size = "cache-memory", 120, 900 << 10
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	blob := strings.Repeat("x", size)
	stored := 0
	for i := range count {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("padding-%03d", i), Namespace: ns,
			Labels:      map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "waypoint", "tenant": "yes"},
			Annotations: map[string]string{"padding": blob[:16<<10]}},
			Data: map[string]string{"blob": blob[:size-(16<<10)]}}
		require.NoError(t, c.Create(ctx, cm, client.FieldOwner("tenant")))
		data, err := json.Marshal(cm)
		require.NoError(t, err)
		stored += len(data)
	}
	require.Greater(t, stored, 100<<20, "the tenant stores more than 100 MB")

	mgr := startManager(t, env.Base)
	cached := &corev1.ConfigMapList{}
	require.Eventually(t, func() bool {
		return mgr.GetCache().List(ctx, cached, client.InNamespace(ns)) == nil && len(cached.Items) == count
	}, 60*time.Second, 200*time.Millisecond, "the cache selects every labelled ConfigMap")
	total := 0
	for _, cm := range cached.Items {
		assert.Empty(t, cm.Data, cm.Name)
		assert.Empty(t, cm.BinaryData, cm.Name)
		assert.Empty(t, cm.Annotations, cm.Name)
		assert.Empty(t, cm.ManagedFields, cm.Name)
		assert.Equal(t, map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "waypoint"}, cm.Labels, cm.Name)
		data, err := json.Marshal(&cm)
		require.NoError(t, err)
		assert.Less(t, len(data), 512, "cached %s: %s", cm.Name, data)
		total += len(data)
	}
	t.Logf("%d ConfigMaps: %d bytes stored, %d bytes cached (%.4f%%)", count, stored, total, 100*float64(total)/float64(stored))
	assert.Less(t, total, count*512, "the cached ConfigMaps hold more than 512 bytes each")
}

// A member labels Services with about 900 KB each, and the EndpointSlice controller copies those
// labels onto each Service's slices (k8s.io/endpointslice utils.go setEndpointSliceLabels; no
// kube-controller-manager runs here, so the test writes the slices as it would). With provision
// onDemand the manager caches every EndpointSlice of the cluster, and holds of each a few hundred
// bytes: none of the member's labels. Attack review item: 81 MiB of controller growth in one run
// before. Measured on the cached objects, not on the process, so the bound is exact.
func TestATenantsServiceLabelsCostTheEndpointSliceCacheAlmostNothingOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	const ns, count, size = "slice-labels", 60, 900 << 10
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	stored := 0
	for i := range count {
		es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%03d-x1", i), Namespace: ns,
			Labels: serviceLabels(size)}, AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.7"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "nb-0"}}}}
		es.Labels[discoveryv1.LabelServiceName] = fmt.Sprintf("svc-%03d", i)
		es.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
		require.NoError(t, c.Create(ctx, es))
		data, err := json.Marshal(es)
		require.NoError(t, err)
		stored += len(data)
	}
	require.Greater(t, stored, 50<<20, "the member stores more than 50 MB")

	mgr := startManager(t, env.Base)
	cached := &discoveryv1.EndpointSliceList{}
	require.Eventually(t, func() bool {
		return mgr.GetCache().List(ctx, cached, client.InNamespace(ns)) == nil && len(cached.Items) == count
	}, 60*time.Second, 200*time.Millisecond, "the cache holds every EndpointSlice")
	total := 0
	for _, es := range cached.Items {
		assert.Equal(t, 2, len(es.Labels), "%s keeps only the EndpointSlice controller's labels", es.Name)
		data, err := json.Marshal(&es)
		require.NoError(t, err)
		assert.Less(t, len(data), 512, "cached %s: %d bytes", es.Name, len(data))
		total += len(data)
	}
	t.Logf("%d EndpointSlices: %d bytes stored, %d bytes cached (%.4f%%)", count, stored, total, 100*float64(total)/float64(stored))
	assert.Less(t, total, count*512, "the cached EndpointSlices hold more than 512 bytes each")
}

// serviceLabels are about size bytes of valid labels: 200-byte keys and 63-byte values.
func serviceLabels(size int) map[string]string {
	prefix := strings.Repeat("p", 190) + ".example.com/"
	out := map[string]string{}
	for n, i := 0, 0; n < size; i++ {
		k := fmt.Sprintf("%spad-%05d", prefix, i)
		out[k] = strings.Repeat("v", 63)
		n += len(k) + 63
	}
	return out
}

// pathReads records the GETs of one namespace's objects, which a manager's informers never send
// (they read cluster-wide): what the runner reads past the cache.
type pathReads struct {
	mu    sync.Mutex
	ns    string
	paths []string
}

func (p *pathReads) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/namespaces/"+p.ns+"/") {
			p.mu.Lock()
			p.paths = append(p.paths, r.URL.Path)
			p.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (p *pathReads) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Clone(p.paths)
	p.paths = nil
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Through the trimming cache, a namespace at rest costs no write, and with the default
// configuration no read past the cache. With mesh.waypoint.seccompPatch on, the one ConfigMap the
// plugins want is read in full on each call (the cache holds none of its data), and found intact.
func TestATrimmingCacheKeepsTheSteadyStateFreeOfWritesOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	for _, tc := range []struct {
		name      string
		seccomp   bool
		wantReads []string
	}{
		{"default configuration", false, nil},
		{"with the per-namespace patch", true, []string{"/api/v1/namespaces/trimmed-seccomp/configmaps/waypoint-seccomp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "trimmed"
			if tc.seccomp {
				ns = "trimmed-seccomp"
			}
			reads := &pathReads{ns: ns}
			restCfg, writes := envtest.CountRequests(env.Base)
			count := restCfg.WrapTransport
			restCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return reads.wrap(count(rt)) }
			mgr := startManager(t, restCfg)
			cfg := config.Default()
			cfg.Mesh.Waypoint.SeccompPatch = ptr.To(tc.seccomp)
			require.NoError(t, cfg.Validate())
			r, err := profileplugins.NewRunner(mgr.GetClient(), cfg, profileplugins.WithManager(mgr, profileplugins.CacheOptions()))
			require.NoError(t, err)
			require.ElementsMatch(t, []schema.GroupKind{{Kind: "ConfigMap"}, {Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}}, r.Trimmed,
				"WithManager knows the cache trims ConfigMaps and RoleBindings")

			p := profileIn(t, env.Client, ns)
			require.Eventually(t, func() bool {
				res := r.Apply(context.Background(), p)
				if res.Err() != nil || res.Changed() {
					return false
				}
				if exists(t, env.Client, &gatewayv1.Gateway{}, ns, "waypoint") && namespaceLabels(t, env.Client, ns)["istio.io/use-waypoint"] == "" {
					programWaypoint(t, env.Client, ns)
					return false
				}
				return len(res.Waiting()) == 0
			}, 30*time.Second, 200*time.Millisecond, "converges through the cache")
			reads.take()
			before := writes.Writes()
			res := r.Apply(context.Background(), p)
			require.NoError(t, res.Err())
			assert.False(t, res.Changed())
			assert.Equal(t, before, writes.Writes(), "a namespace at rest costs a write")
			assert.Equal(t, tc.wantReads, reads.take(), "reads past the cache at rest")
		})
	}
}
