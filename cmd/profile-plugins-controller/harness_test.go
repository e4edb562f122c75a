package main

import (
	"context"
	"flag"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

// TestMain runs four tests at a time unless -parallel says otherwise: they mostly wait for the
// API server and the controller's watches, and go test's default (GOMAXPROCS) leaves two cores
// idle while two tests wait.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", "4"); err != nil {
			panic(err)
		}
	}
	envtest.Main(m)
}

// Keys of the package's API servers (envtest.StartNamed) for tests that change what the whole
// cluster sees, which the tests on the shared server (envtest.Start) must not meet. The tests of
// one key run one after another (oneAtATime), since each changes the same cluster-wide objects,
// and their managers reconcile only their own Profiles (only).
const (
	// installServer has namespace kubeflow (other tests check that the controller never makes
	// it) and an install's RBAC: deploy/rbac/role.yaml, or an overlay's build, which binds the
	// same ClusterRoles.
	installServer = "kubeflow namespace and an install's RBAC"
	// guardServer has the guard installed, by each test in turn (installGuard).
	guardServer = "guard"
)

// keyLocks keep the tests of one key one at a time.
var keyLocks = map[string]*sync.Mutex{installServer: {}, guardServer: {}}

// oneAtATime returns the API server of key once no other test of key runs, and holds it until
// the test and its cleanups (its manager stopped, its guard removed) are done; the test runs in
// parallel with the tests on other servers.
func oneAtATime(t *testing.T, key string) *envtest.Env {
	t.Helper()
	t.Parallel()
	keyLocks[key].Lock()
	t.Cleanup(keyLocks[key].Unlock)
	return envtest.StartNamed(t, key)
}

type harness struct {
	t   *testing.T
	env *envtest.Env
	r   *Reconciler
	reg *prometheus.Registry
}

// newHarness is a harness on the package's shared API server, with a client whose requests are
// counted apart from other tests'.
func newHarness(t *testing.T, mode config.MeshMode) *harness {
	h := &harness{t: t, env: envtest.Start(t).Counted(t), reg: prometheus.NewRegistry()}
	h.configure(mode)
	return h
}

// configure swaps the plugin configuration, as an admin's config change and restart would.
func (h *harness) configure(mode config.MeshMode) {
	cfg := config.Default()
	cfg.Mesh.Mode = mode
	require.NoError(h.t, cfg.Validate())
	r, err := newReconciler(h.env.Client, cfg)
	require.NoError(h.t, err)
	if h.r != nil {
		r.Metrics = h.r.Metrics
	} else {
		r.Metrics = NewMetrics(h.reg)
	}
	h.r = r
}

// useConfig swaps in a reconciler for cfg, keeping the metrics, as an admin's restart would.
func (h *harness) useConfig(cfg *config.Config) {
	h.t.Helper()
	require.NoError(h.t, cfg.Validate())
	r, err := newReconciler(h.env.Client, cfg)
	require.NoError(h.t, err)
	r.Metrics = h.r.Metrics
	h.r = r
}

// withPatch switches on the opt-in per-namespace seccomp patch (mesh.waypoint.seccompPatch).
func (h *harness) withPatch() {
	cfg := config.Default()
	cfg.Mesh.Waypoint.SeccompPatch = ptr.To(true)
	h.useConfig(cfg)
}

// reconcile runs one Reconcile of the Profile name and requires it to succeed.
func (h *harness) reconcile(name string) ctrl.Result {
	h.t.Helper()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	require.NoError(h.t, err)
	return res
}

func (h *harness) profile(name string) *profilev1.Profile {
	h.t.Helper()
	p := &profilev1.Profile{}
	require.NoError(h.t, h.env.Client.Get(context.Background(), client.ObjectKey{Name: name}, p))
	return p
}

func (h *harness) labels(ns string) map[string]string {
	h.t.Helper()
	n := &corev1.Namespace{}
	require.NoError(h.t, h.env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, n))
	return n.Labels
}

func (h *harness) namespace(name string) *corev1.Namespace {
	h.t.Helper()
	n := &corev1.Namespace{}
	require.NoError(h.t, h.env.Client.Get(context.Background(), client.ObjectKey{Name: name}, n))
	return n
}

func (h *harness) exists(obj client.Object, ns, name string) bool {
	h.t.Helper()
	err := h.env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(h.t, err)
	return true
}

// programWaypoint writes the status istiod would write once the waypoint is ready.
func (h *harness) programWaypoint(ns string) {
	h.t.Helper()
	gw := &gatewayv1.Gateway{}
	require.NoError(h.t, h.env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
	now := metav1.Now()
	ip := gatewayv1.IPAddressType
	gw.Status.Conditions = []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: gw.Generation, LastTransitionTime: now},
		{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", ObservedGeneration: gw.Generation, LastTransitionTime: now},
	}
	gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: &ip, Value: "10.96.10.10"}}
	require.NoError(h.t, h.env.Client.Status().Update(context.Background(), gw))
}

// enrol creates a Profile and reconciles it to its steady state: in ambient, routed through a
// Programmed waypoint.
func (h *harness) enrol(ns, owner string) {
	h.t.Helper()
	createProfile(h.t, h.env.Client, ns, owner)
	h.reconcile(ns)
	h.programWaypoint(ns)
	h.reconcile(ns)
	labels := h.labels(ns)
	require.Equal(h.t, "ambient", labels["istio.io/dataplane-mode"])
	require.Equal(h.t, "waypoint", labels["istio.io/use-waypoint"])
}

func createProfile(t *testing.T, c client.Client, name, owner string) {
	t.Helper()
	require.NoError(t, c.Create(context.Background(), &profilev1.Profile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       profilev1.ProfileSpec{Owner: fixture.User(owner)},
	}))
}

// ownedNamespace is a namespace an admin made beforehand for owner, annotated as the profiles
// controller expects.
func ownedNamespace(name, owner string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{ownership.OwnerAnnotation: owner}}}
}

// handedOver creates ns as an admin would before the Profile exists, handed over by its owner
// annotation, with the ServiceAccount pods need (no controller-manager runs here).
func (h *harness) handedOver(ns, owner string) {
	h.t.Helper()
	c := h.env.Client
	require.NoError(h.t, c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Annotations: map[string]string{ownership.OwnerAnnotation: owner}}}))
	require.NoError(h.t, c.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}))
}

func ptrTo[T any](v T) *T { return &v }

// only passes to the Reconciler (wrapped by wrap, if set) the reconciles of the named Profiles
// alone: the package's tests share an API server, and a manager reconciles every Profile it sees,
// other tests' too, with a configuration of its own.
func only(wrap func(*Reconciler) reconcile.Reconciler, names ...string) func(*Reconciler) reconcile.Reconciler {
	ours := sets.New(names...)
	return func(r *Reconciler) reconcile.Reconciler {
		var next reconcile.Reconciler = r
		if wrap != nil {
			next = wrap(r)
		}
		return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			if !ours.Has(req.Name) {
				return reconcile.Result{}, nil
			}
			return next.Reconcile(ctx, req)
		})
	}
}

// startManager runs the reference controller for cfg in a manager on restCfg until the test ends,
// as main does: opts gets the scheme, main's cache options, no metrics server, and no controller-name check (several
// tests start one). wrap, if set, stands between the watches and the Reconciler. The context it
// returns ends with the test.
func startManager(t *testing.T, restCfg *rest.Config, opts ctrl.Options, cfg *config.Config, wrap func(*Reconciler) reconcile.Reconciler) context.Context {
	t.Helper()
	ctx, stop := runManager(t, restCfg, opts, cfg, wrap)
	t.Cleanup(stop)
	return ctx
}

// runManager is startManager with the stop in the caller's hands (a restart), which waits until
// the manager has stopped; calling it twice is harmless.
func runManager(t *testing.T, restCfg *rest.Config, opts ctrl.Options, cfg *config.Config, wrap func(*Reconciler) reconcile.Reconciler) (context.Context, func()) {
	t.Helper()
	opts.Scheme = envtest.NewScheme()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.Controller = ctrlconfig.Controller{SkipNameValidation: ptrTo(true)}
	opts.Cache = cacheOptions()
	mgr, err := ctrl.NewManager(restCfg, opts)
	require.NoError(t, err)
	r, err := newManagedReconciler(mgr, cfg)
	require.NoError(t, err)
	r.Metrics = NewMetrics(prometheus.NewRegistry())
	r.Recorder = mgr.GetEventRecorder("profile-plugins-test")
	var rec reconcile.Reconciler = r
	if wrap != nil {
		rec = wrap(r)
	}
	require.NoError(t, setup(mgr, rec, cfg.Mesh.OnDemand()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	return ctx, func() { once.Do(func() { cancel(); require.NoError(t, <-done) }) }
}
