package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

func TestMain(m *testing.M) { envtest.Main(m) }

type harness struct {
	t   *testing.T
	env *envtest.Env
	r   *Reconciler
	reg *prometheus.Registry
}

func newHarness(t *testing.T, mode config.MeshMode) *harness {
	h := &harness{t: t, env: envtest.Start(t), reg: prometheus.NewRegistry()}
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

func createProfile(t *testing.T, c client.Client, name, owner string) {
	t.Helper()
	require.NoError(t, c.Create(context.Background(), &profilev1.Profile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       profilev1.ProfileSpec{Owner: fixture.User(owner)},
	}))
}

func TestEndToEnd(t *testing.T) {
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const ns = "alice"
	createProfile(t, c, ns, "alice@example.com")

	// First reconcile: everything but the waypoint enrolment.
	writes := h.env.Requests.Writes()
	res := h.reconcile(ns)
	assert.Greater(t, h.env.Requests.Writes(), writes, "the counter sees writes")
	assert.Equal(t, runner.DefaultWaitRequeue, res.RequeueAfter, "waiting for the waypoint asks for a requeue")
	labels := h.labels(ns)
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the ztunnel policy exists, so the namespace is enrolled")
	assert.Equal(t, "disabled", labels["istio-injection"])
	assert.NotContains(t, labels, "istio.io/use-waypoint", "no waypoint label before the waypoint is Programmed")
	assert.Equal(t, "baseline", labels["pod-security.kubernetes.io/enforce"])
	assert.True(t, h.exists(&gatewayv1.Gateway{}, ns, "waypoint"))
	assert.False(t, h.exists(&corev1.ConfigMap{}, ns, "waypoint-seccomp"), "no per-namespace patch by default: the class defaults harden the waypoint")
	assert.True(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio-ztunnel"))
	owner := &istiosecurityv1.AuthorizationPolicy{}
	require.True(t, h.exists(owner, ns, "ns-owner-access-istio"))
	require.Len(t, owner.Spec.TargetRefs, 1)
	require.Len(t, owner.OwnerReferences, 1)
	assert.Equal(t, "Profile", owner.OwnerReferences[0].Kind)
	cond := h.profile(ns).Status.Conditions
	require.Len(t, cond, 1)
	assert.Equal(t, "False", cond[0].Status)
	assert.Contains(t, cond[0].Message, "waiting for waypoint: Gateway alice/waypoint does not exist yet")
	assert.Contains(t, h.profile(ns).Finalizers, Finalizer)
	assert.Equal(t, 1.0, testutil.ToFloat64(h.r.Metrics.waiting))

	// Someone else labels the namespace; the label must survive everything below.
	require.NoError(t, c.Apply(context.Background(), corev1ac.Namespace(ns).WithLabels(map[string]string{"team": "ml"}), client.FieldOwner("kubectl")))

	// istiod programs the waypoint: the namespace now uses it.
	h.programWaypoint(ns)
	res = h.reconcile(ns)
	assert.Zero(t, res.RequeueAfter)
	labels = h.labels(ns)
	assert.Equal(t, "waypoint", labels["istio.io/use-waypoint"])
	assert.Equal(t, "true", labels["istio.io/ingress-use-waypoint"])
	assert.Equal(t, "True", h.profile(ns).Status.Conditions[0].Status)
	assert.Equal(t, 0.0, testutil.ToFloat64(h.r.Metrics.waiting))

	// Nothing changed: the next reconcile sends no write at all.
	before := h.env.Requests.Writes()
	h.reconcile(ns)
	assert.Equal(t, before, h.env.Requests.Writes(), "a reconcile with nothing to do must not write")

	// Switch to sidecar mode: ambient objects and labels go, injection comes.
	h.configure(config.ModeSidecar)
	h.reconcile(ns)
	labels = h.labels(ns)
	assert.Equal(t, "enabled", labels["istio-injection"])
	for _, k := range []string{"istio.io/dataplane-mode", "istio.io/use-waypoint", "istio.io/ingress-use-waypoint"} {
		assert.NotContains(t, labels, k)
	}
	assert.False(t, h.exists(&gatewayv1.Gateway{}, ns, "waypoint"), "waypoint pruned")
	assert.False(t, h.exists(&corev1.ConfigMap{}, ns, "waypoint-seccomp"), "seccomp patch pruned")
	assert.False(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio-ztunnel"), "ztunnel policy pruned")
	require.True(t, h.exists(owner, ns, "ns-owner-access-istio"))
	assert.Empty(t, owner.Spec.TargetRefs, "the sidecar owner policy applies to pods")
	before = h.env.Requests.Writes()
	h.reconcile(ns)
	assert.Equal(t, before, h.env.Requests.Writes(), "sidecar steady state writes nothing")

	// And back to ambient: it converges again, through the same waiting state. Injection and the
	// owner policy on the pods stay until the namespace is observed in ambient with its ztunnel policy.
	h.configure(config.ModeAmbient)
	h.reconcile(ns)
	labels = h.labels(ns)
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"])
	assert.Equal(t, "enabled", labels["istio-injection"])
	require.True(t, h.exists(owner, ns, "ns-owner-access-istio"))
	assert.Empty(t, owner.Spec.TargetRefs, "still on the pods, for those with a sidecar")
	assert.False(t, h.exists(&gatewayv1.Gateway{}, ns, "waypoint"), "no waypoint while the owner policy is not attached to it")
	h.reconcile(ns)
	assert.Equal(t, "disabled", h.labels(ns)["istio-injection"])
	require.True(t, h.exists(owner, ns, "ns-owner-access-istio"))
	assert.NotEmpty(t, owner.Spec.TargetRefs)
	h.reconcile(ns)
	assert.True(t, h.exists(&gatewayv1.Gateway{}, ns, "waypoint"))
	assert.NotContains(t, h.labels(ns), "istio.io/use-waypoint", "a new waypoint starts unprogrammed")
	h.programWaypoint(ns)
	h.reconcile(ns)
	assert.Equal(t, "waypoint", h.labels(ns)["istio.io/use-waypoint"])
	assert.Equal(t, "ml", h.labels(ns)["team"], "a label set by someone else survives")
	before = h.env.Requests.Writes()
	h.reconcile(ns)
	assert.Equal(t, before, h.env.Requests.Writes())

	// Delete the Profile: the finalizer revokes everything the plugins made.
	require.NoError(t, c.Delete(context.Background(), h.profile(ns)))
	h.reconcile(ns)
	labels = h.labels(ns)
	for k := range labels {
		assert.False(t, strings.HasPrefix(k, "istio") || strings.HasPrefix(k, "pod-security"), "label %s left after revoke", k)
	}
	assert.Equal(t, "ml", labels["team"])
	assert.False(t, h.exists(&gatewayv1.Gateway{}, ns, "waypoint"))
	assert.False(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio"))
	assert.False(t, h.exists(&profilev1.Profile{}, "", ns), "finalizer removed, profile gone")
}

func TestForeignObjectWithAManagedNameIsLeftAlone(t *testing.T) {
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const ns = "bob"
	require.NoError(t, c.Create(context.Background(), ownedNamespace(ns, "bob@example.com")))
	mine := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ns-owner-access-istio", Namespace: ns}}
	mine.Spec.Rules = nil // allow nothing: the user's own choice
	require.NoError(t, c.Create(context.Background(), mine, client.FieldOwner("bob")))
	createProfile(t, c, ns, "bob@example.com")

	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}})
	require.NoError(t, err, "a conflict is reported in the status, not retried")
	assert.NotZero(t, res.RequeueAfter)
	got := &istiosecurityv1.AuthorizationPolicy{}
	require.True(t, h.exists(got, ns, "ns-owner-access-istio"))
	assert.Empty(t, got.Labels, "not marked as ours")
	assert.Empty(t, got.Spec.TargetRefs, "not overwritten")
	assert.Empty(t, got.OwnerReferences)
	cond := h.profile(ns).Status.Conditions[0]
	assert.Equal(t, "False", cond.Status)
	assert.Contains(t, cond.Message, "AuthorizationPolicy.security.istio.io/ns-owner-access-istio exists and was made by another writer; it is left alone")
}

func TestPodSecurityWarningsReachTheResult(t *testing.T) {
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const ns = "carol"
	require.NoError(t, c.Create(context.Background(), ownedNamespace(ns, "carol@example.com")))
	require.NoError(t, c.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}))
	require.NoError(t, c.Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "root-shell", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sh", Image: "busybox",
			SecurityContext: &corev1.SecurityContext{Privileged: ptrTo(true)}}}},
	}))
	createProfile(t, c, ns, "carol@example.com")
	p := h.profile(ns)
	res := h.r.Runner.Apply(context.Background(), p)
	require.NoError(t, res.Err())
	warnings := strings.Join(res.Warnings(), "\n")
	assert.Contains(t, warnings, "pss: tightening enforce from \"privileged\" to \"baseline\": 1 running pod(s) violate it", "the preflight")
	assert.Contains(t, warnings, `existing pods in namespace "carol" violate the new PodSecurity enforce level "baseline:latest"`, "the API server's own warning")
}

func ptrTo[T any](v T) *T { return &v }

// The manager wiring: a Profile is reconciled through the watch, and a Gateway that becomes
// Programmed reconciles its Profile through the owner reference, well before the 15 s requeue.
func TestManagerWiring(t *testing.T) {
	env := envtest.Start(t)
	ctx := startManager(t, env.Config, ctrl.Options{}, config.Default(), nil)

	h := &harness{t: t, env: env}
	const ns = "dave"
	createProfile(t, env.Client, ns, "dave@example.com")
	require.Eventually(t, func() bool {
		n := &corev1.Namespace{}
		return env.Client.Get(ctx, client.ObjectKey{Name: ns}, n) == nil && n.Labels["istio.io/dataplane-mode"] == "ambient"
	}, 10*time.Second, 100*time.Millisecond, "the profile is reconciled through the watch")

	h.programWaypoint(ns)
	require.Eventually(t, func() bool {
		n := &corev1.Namespace{}
		return env.Client.Get(ctx, client.ObjectKey{Name: ns}, n) == nil && n.Labels["istio.io/use-waypoint"] == "waypoint"
	}, 10*time.Second, 100*time.Millisecond, "the Gateway's status change reconciles the profile")
}

// A user edits their own Profile to loosen Pod Security: the namespace keeps the admin's level,
// and the Profile's condition says what was refused, without a retry storm.
func TestProfileEditCannotLoosenPodSecurity(t *testing.T) {
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const ns = "frank"
	createProfile(t, c, ns, "frank@example.com")
	h.reconcile(ns)
	require.Equal(t, "baseline", h.labels(ns)["pod-security.kubernetes.io/enforce"])

	p := h.profile(ns)
	p.Spec.Plugins = []profilev1.Plugin{{
		TypeMeta: metav1.TypeMeta{Kind: "PodSecurity"},
		Spec:     &runtime.RawExtension{Raw: []byte(`{"enforce":"privileged"}`)},
	}}
	require.NoError(t, c.Update(context.Background(), p))
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}})
	require.NoError(t, err, "a refused request is reported, not retried")
	assert.NotZero(t, res.RequeueAfter, "still waiting for the waypoint")
	assert.Equal(t, "baseline", h.labels(ns)["pod-security.kubernetes.io/enforce"])
	cond := h.profile(ns).Status.Conditions[0]
	assert.Equal(t, "False", cond.Status)
	assert.Contains(t, cond.Message, `profile "frank": spec.plugins[0].spec.enforce: level "privileged" refused`)
}

// startManager runs the reference controller for cfg in a manager on restCfg until the test ends,
// as main does: opts gets the scheme, main's cache options, no metrics server, and no controller-name check (several
// tests start one). wrap, if set, stands between the watches and the Reconciler. The context it
// returns ends with the test.
func startManager(t *testing.T, restCfg *rest.Config, opts ctrl.Options, cfg *config.Config, wrap func(*Reconciler) reconcile.Reconciler) context.Context {
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
	require.NoError(t, setup(mgr, rec))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return ctx
}
