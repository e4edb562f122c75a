package platform_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

func TestMain(m *testing.M) { envtest.Main(m) }

// ownNamespaces is the key of the API server (envtest.StartNamed) of the tests that read only the
// findings of their own namespaces, in parallel. The tests on the shared one (envtest.Start) read
// the whole report of a platform made by fixture.Platform, one after another.
const ownNamespaces = "tests reading the findings of their own namespaces"

// ofNamespaces keeps the findings in one of namespaces.
func ofNamespaces(findings []platform.Finding, namespaces ...string) []platform.Finding {
	return slices.DeleteFunc(slices.Clone(findings), func(f platform.Finding) bool { return !slices.Contains(namespaces, f.Namespace) })
}

const (
	pipelinesUI = "cluster.local/ns/kubeflow/sa/ml-pipeline-ui"
	culler      = "cluster.local/ns/kubeflow/sa/notebook-controller-service-account"
	katib       = "cluster.local/ns/kubeflow/sa/katib-controller"
)

// check runs Check on the real API server and asserts it wrote nothing. The tests that use it
// change the configuration under the guard fixture.Platform installed, which makes that guard
// stale; that is TestCheckReportsAGuardRenderedFromAnotherConfiguration's to test, so it is left out.
func check(t *testing.T, env *envtest.Env, cfg *config.Config) []platform.Finding {
	t.Helper()
	writes := env.Requests.Writes()
	report, err := platform.Check(context.Background(), env.Client, cfg)
	require.NoError(t, err)
	assert.Equal(t, writes, env.Requests.Writes(), "the check must only read")
	return slices.DeleteFunc(report.Findings, func(f platform.Finding) bool { return f.Kind == platform.FindingGuardStale })
}

func deletePods(t *testing.T, c client.Client, namespace string) {
	t.Helper()
	require.NoError(t, c.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(namespace), client.GracePeriodSeconds(0)))
	require.Eventually(t, func() bool {
		pods := &corev1.PodList{}
		require.NoError(t, c.List(context.Background(), pods, client.InNamespace(namespace)))
		return len(pods.Items) == 0
	}, 10*time.Second, 50*time.Millisecond)
}

// Issue 15, done when: the platform check is tested on the real API server with a sidecar-mode
// and an ambient-mode kubeflow namespace. kubeflow starts as most installs have it, with
// sidecars, then moves to ambient.
func TestCheckPlatformKubeflowSidecarThenAmbient(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	cfg := config.Default()
	fixture.Platform(t, c, cfg) // istio-system with its gateway, kubeflow ambient: then switch it
	fixture.Label(t, c, "kubeflow", map[string]*string{"istio.io/dataplane-mode": nil, "istio-injection": ptr.To("enabled")})
	deletePods(t, c, "kubeflow")
	fixture.Ensure(t, c, fixture.MeshPod("kubeflow", "ml-pipeline-ui-0", "ml-pipeline-ui", fixture.SidecarPod))
	fixture.Ensure(t, c, fixture.MeshPod("kubeflow", "notebook-controller-0", "notebook-controller-service-account", fixture.SidecarPod))
	// Another service account's ambient pod must not count for any caller (the field selector).
	fixture.Ensure(t, c, fixture.MeshPod("kubeflow", "other-0", "other", fixture.AmbientPod))
	// A finished pod of the Katib controller says nothing about what runs: labels decide.
	done := fixture.MeshPod("kubeflow", "katib-controller-done", "katib-controller", fixture.AmbientPod)
	fixture.Ensure(t, c, done)
	done.Status.Phase = corev1.PodSucceeded
	require.NoError(t, c.Status().Update(context.Background(), done))

	skip := "its calls skip the waypoint, and the ztunnel policy denies them"
	fix := func(name string) string {
		return "set dataPlane: sidecar for " + name + " (the ztunnel policy then admits it at L4, without its L7 limits), or move namespace kubeflow to ambient and restart the caller's pods"
	}
	assert.Equal(t, []platform.Finding{
		{Kind: platform.FindingDataPlaneMismatch, What: "pipelines-ui", Namespace: "kubeflow", Principal: pipelinesUI,
			Problem: "configured dataPlane ambient, but runs with a sidecar (1 of 1 pod(s), e.g. ml-pipeline-ui-0): " + skip, Fix: fix("pipelines-ui")},
		{Kind: platform.FindingDataPlaneMismatch, What: "notebook-controller", Namespace: "kubeflow", Principal: culler,
			Problem: "configured dataPlane ambient, but runs with a sidecar (1 of 1 pod(s), e.g. notebook-controller-0): " + skip, Fix: fix("notebook-controller")},
		{Kind: platform.FindingDataPlaneMismatch, What: "katib-controller", Namespace: "kubeflow", Principal: katib,
			Problem: "configured dataPlane ambient, but runs with a sidecar (no pod runs as ServiceAccount katib-controller, so this is read from the labels of namespace kubeflow): " + skip,
			Fix:     fix("katib-controller")},
	}, check(t, env, cfg))

	// The admin declares them sidecar callers: nothing left to report.
	sidecarCfg := config.Default()
	for i := range sidecarCfg.Authorization.PlatformCallers {
		sidecarCfg.Authorization.PlatformCallers[i].DataPlane = config.CallerSidecar
	}
	assert.Empty(t, check(t, env, sidecarCfg))
	// With sidecars in the user namespaces too, either data plane of a caller works.
	sidecarMode := config.Default()
	sidecarMode.Mesh.Mode = config.ModeSidecar
	assert.Empty(t, check(t, env, sidecarMode))

	// kubeflow moves to ambient and its pods restart; one has not come back into the mesh.
	fixture.Label(t, c, "kubeflow", map[string]*string{"istio.io/dataplane-mode": ptr.To("ambient"), "istio-injection": nil})
	deletePods(t, c, "kubeflow")
	fixture.Ensure(t, c, fixture.MeshPod("kubeflow", "ml-pipeline-ui-1", "ml-pipeline-ui", fixture.AmbientPod))
	fixture.Ensure(t, c, fixture.MeshPod("kubeflow", "ml-pipeline-ui-2", "ml-pipeline-ui", nil))
	fixture.Ensure(t, c, fixture.MeshPod("kubeflow", "notebook-controller-1", "notebook-controller-service-account", fixture.AmbientPod))
	fixture.Ensure(t, c, fixture.MeshPod("kubeflow", "katib-controller-1", "katib-controller", fixture.AmbientPod))
	enrol := "enrol namespace kubeflow: label it istio.io/dataplane-mode=ambient (dataPlane: ambient) or istio-injection=enabled (dataPlane: sidecar), then restart the caller's pods"
	notInMesh := platform.Finding{Kind: platform.FindingCallerNotInMesh, What: "pipelines-ui", Namespace: "kubeflow", Principal: pipelinesUI,
		Problem: "runs outside the mesh (1 of 2 pod(s), e.g. ml-pipeline-ui-2): its calls carry no identity, so every user namespace denies them", Fix: enrol}
	assert.Equal(t, []platform.Finding{notInMesh}, check(t, env, cfg))

	// The sidecar declarations are now wrong the other way.
	ambientAsSidecar := func(name, principal, evidence string) platform.Finding {
		return platform.Finding{Kind: platform.FindingDataPlaneMismatch, What: name, Namespace: "kubeflow", Principal: principal,
			Problem: "configured dataPlane sidecar, but runs in ambient (" + evidence + "): the ztunnel policy admits it to every port and path of every pod, more than its rule at the waypoint allows",
			Fix:     "set dataPlane: ambient for " + name}
	}
	assert.Equal(t, []platform.Finding{
		ambientAsSidecar("pipelines-ui", pipelinesUI, "1 of 2 pod(s), e.g. ml-pipeline-ui-1"),
		notInMesh,
		ambientAsSidecar("notebook-controller", culler, "1 of 1 pod(s), e.g. notebook-controller-1"),
		ambientAsSidecar("katib-controller", katib, "1 of 1 pod(s), e.g. katib-controller-1"),
	}, check(t, env, sidecarCfg))

	require.NoError(t, c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kubeflow", Name: "ml-pipeline-ui-2"}}, client.GracePeriodSeconds(0)))
	assert.Empty(t, check(t, env, cfg), "kubeflow in ambient, as configured")
}

// Principals whose namespace does not exist, or whose gateway has no pods, are reported.
func TestCheckPlatformMissing(t *testing.T) {
	env := envtest.Start(t)
	cfg := config.Default()
	fixture.Platform(t, env.Client, cfg)
	cfg.Authorization.PlatformCallers = append(cfg.Authorization.PlatformCallers, config.PlatformCaller{
		Name: "activator", Principal: "cluster.local/ns/knative-serving/sa/activator", DataPlane: config.CallerAmbient})
	cfg.Authorization.Principals.IngressGateway = "cluster.local/ns/istio-system/sa/gateway"
	assert.Equal(t, []platform.Finding{
		{Kind: platform.FindingCallerNamespaceMissing, What: "activator", Namespace: "knative-serving", Principal: "cluster.local/ns/knative-serving/sa/activator",
			Problem: "namespace knative-serving does not exist: the caller is not installed, or its principal names the wrong namespace, so the owner policy's rule for it never matches",
			Fix:     "correct authorization.platformCallers[3].principal, or remove the caller from authorization.platformCallers if it is not installed"},
		{Kind: platform.FindingIngressGatewayMissing, What: platform.WhatIngressGateway, Namespace: "istio-system", Principal: "cluster.local/ns/istio-system/sa/gateway",
			Problem: "no pod in namespace istio-system runs as ServiceAccount gateway: the owner policy admits users only through this principal, so no user reaches their namespace",
			Fix:     "set authorization.principals.ingressGateway to the principal of the ingress gateway's pods (their namespace and ServiceAccount)"},
	}, check(t, env, cfg))

	cfg.Authorization.Principals.IngressGateway = "cluster.local/ns/gateways/sa/gateway"
	findings := check(t, env, cfg)
	require.Len(t, findings, 2)
	assert.Equal(t, "namespace gateways does not exist: the owner policy admits users only through this principal, so no user reaches their namespace", findings[1].Problem)
}

// Issue 15: with enforce restricted and no seccomp default for the class, the waypoint cannot
// start; the class-defaults ConfigMap in istiod's namespace fixes it, and only there.
func TestCheckPlatformWaypointSeccomp(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	cfg := config.Default()
	fixture.Platform(t, c, cfg)
	fixtureDefaults, err := waypoint.ClassDefaults(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, fixtureDefaults), "the admin has not applied the class defaults")
	t.Cleanup(func() { fixture.Platform(t, c, cfg) })
	cfg.PodSecurity.Enforce.Level = "restricted"
	cfg.Mesh.Waypoint.SeccompPatch = ptr.To(true)
	assert.Empty(t, check(t, env, cfg), "the per-namespace seccomp patch (the opt-in) makes the waypoint admissible")

	cfg.Mesh.Waypoint.SeccompPatch = ptr.To(false) // the default
	cannotStart := platform.Finding{Kind: platform.FindingWaypointCannotStart, What: platform.WhatWaypoint, Namespace: "istio-system",
		Problem: "enforce is restricted, mesh.waypoint.seccompPatch is off, and no ConfigMap in namespace istio-system is labelled gateway.istio.io/defaults-for-class=istio-waypoint: " +
			"Pod Security rejects the waypoint's pods, so it is never Programmed and every user namespace waits for it forever",
		Fix: "apply the class-defaults ConfigMap that `render -cluster` emits into namespace istio-system, or set mesh.waypoint.seccompPatch: true"}
	assert.Equal(t, []platform.Finding{cannotStart}, check(t, env, cfg))
	// Under baseline the configured level admits the waypoint, but any Profile may choose
	// restricted: the lower-severity kind says those namespaces would wait forever.
	baseline := *cfg
	baseline.PodSecurity.Enforce.Level = "baseline"
	ifRestricted := cannotStart
	ifRestricted.Kind = platform.FindingWaypointCannotStartIfRestricted
	ifRestricted.Problem = "enforce is baseline, but any Profile may choose restricted (and a stricter enforce label set by another writer is kept), " +
		"and mesh.waypoint.seccompPatch is off, and no ConfigMap in namespace istio-system is labelled gateway.istio.io/defaults-for-class=istio-waypoint: " +
		"in each such namespace Pod Security rejects the waypoint's pods, so it is never Programmed and the namespace waits for it forever"
	assert.Equal(t, []platform.Finding{ifRestricted}, check(t, env, &baseline))

	// Class defaults in the root namespace would not help: istiod reads only its own namespace.
	cfg.Mesh.IstiodNamespace = "istiod-elsewhere"
	fixture.Ensure(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istiod-elsewhere"}})
	defaults := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "waypoint-defaults", Labels: map[string]string{waypoint.ClassDefaultsLabel: "istio-waypoint"}},
		Data:       map[string]string{"deployment": "spec:\n  template:\n    spec:\n      securityContext:\n        seccompProfile:\n          type: RuntimeDefault\n"},
	}
	require.NoError(t, c.Create(ctx, defaults))
	elsewhere := cannotStart
	elsewhere.Namespace = "istiod-elsewhere"
	elsewhere.Problem = "enforce is restricted, mesh.waypoint.seccompPatch is off, and no ConfigMap in namespace istiod-elsewhere is labelled gateway.istio.io/defaults-for-class=istio-waypoint: " +
		"Pod Security rejects the waypoint's pods, so it is never Programmed and every user namespace waits for it forever"
	elsewhere.Fix = "apply the class-defaults ConfigMap that `render -cluster` emits into namespace istiod-elsewhere, or set mesh.waypoint.seccompPatch: true"
	assert.Equal(t, []platform.Finding{elsewhere}, check(t, env, cfg))

	cfg.Mesh.IstiodNamespace = "istio-system"
	assert.Empty(t, check(t, env, cfg), "the class defaults set RuntimeDefault: the finding is gone")

	// Defaults that set something else do not count; a key istiod does not support breaks every mode.
	defaults.Data["deployment"] = "spec:\n  replicas: 2\n"
	require.NoError(t, c.Update(ctx, defaults))
	noSeccomp := cannotStart
	noSeccomp.ConfigMap = "waypoint-defaults"
	noSeccomp.Problem = "enforce is restricted, mesh.waypoint.seccompPatch is off, and the class defaults (the oldest labelled ConfigMap, the one istiod applies) set no pod seccompProfile that restricted admits (or their deployment key does not parse): " +
		"Pod Security rejects the waypoint's pods, so it is never Programmed and every user namespace waits for it forever"
	assert.Equal(t, []platform.Finding{noSeccomp}, check(t, env, cfg))
	defaults.Data["pod"] = "{}"
	require.NoError(t, c.Update(ctx, defaults))
	assert.Equal(t, []platform.Finding{{Kind: platform.FindingWaypointCannotStart, What: platform.WhatWaypoint, Namespace: "istio-system", ConfigMap: "waypoint-defaults",
		Problem: `the class defaults have key(s) ["pod"], which istiod does not support, so it renders no waypoint of class istio-waypoint`,
		Fix:     "keep only the keys deployment, service, serviceAccount, horizontalPodAutoscaler, podDisruptionBudget in ConfigMap istio-system/waypoint-defaults"}},
		check(t, env, &baseline))
	require.NoError(t, c.Delete(ctx, defaults))
}

// Every read error is returned, wrapped, naming what was read.
func TestCheckPlatformReadErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	cfg := config.Default()
	cfg.PodSecurity.Enforce.Level = "restricted"
	cases := map[string]struct {
		funcs interceptor.Funcs
		want  string
	}{
		"namespace": {interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return boom
		}},
			"platform caller pipelines-ui (authorization.platformCallers[0].principal): reading Namespace kubeflow: boom"},
		"pods": {interceptor.Funcs{List: func(_ context.Context, _ client.WithWatch, l client.ObjectList, _ ...client.ListOption) error {
			if _, ok := l.(*corev1.PodList); ok {
				return boom
			}
			return nil
		}}, "platform caller pipelines-ui (authorization.platformCallers[0].principal): listing Pods of ServiceAccount ml-pipeline-ui in namespace kubeflow: boom"},
		"configmaps": {interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
			if _, ok := l.(*corev1.ConfigMapList); ok {
				return boom
			}
			return c.List(ctx, l, o...)
		}}, "listing the waypoint class defaults (ConfigMaps labelled gateway.istio.io/defaults-for-class=istio-waypoint) in namespace istio-system (mesh.istiodNamespace): boom"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := fake.NewClientBuilder().WithIndex(&corev1.Pod{}, "spec.serviceAccountName", func(o client.Object) []string {
				return []string{o.(*corev1.Pod).Spec.ServiceAccountName}
			}).WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeflow"}}).WithInterceptorFuncs(tc.funcs).Build()
			_, err := platform.Check(context.Background(), r, cfg)
			assert.ErrorIs(t, err, boom)
			assert.EqualError(t, err, tc.want)
		})
	}

	bad := config.Default()
	bad.Authorization.PlatformCallers[1].Principal = "kubeflow/notebooks"
	_, err := platform.Check(context.Background(), fake.NewClientBuilder().Build(), bad)
	assert.EqualError(t, err, `authorization.platformCallers[1].principal "kubeflow/notebooks": must look like <trust domain>/ns/<namespace>/sa/<service account>`)

	// Mode none reads only the guard, which protects Pod Security in every mode.
	none := config.Default()
	none.Mesh.Mode = config.ModeNone
	guarded, err := guard.Objects(none)
	require.NoError(t, err)
	reads := 0
	count := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, o ...client.GetOption) error {
		if _, ok := obj.(*admissionv1.ValidatingAdmissionPolicy); !ok {
			return boom
		}
		reads++
		return c.Get(ctx, key, obj, o...)
	}}
	report, err := platform.Check(context.Background(), fake.NewClientBuilder().WithObjects(guarded...).WithInterceptorFuncs(count).Build(), none)
	require.NoError(t, err, "mode none reads nothing but the guard")
	assert.Equal(t, "platform check: no findings", report.String())
	assert.Equal(t, len(guard.Names()), reads)
}

func TestPlatformReportString(t *testing.T) {
	t.Parallel()
	r := platform.Report{Findings: []platform.Finding{{Kind: platform.FindingWaypointCannotStart, What: "waypoint",
		Namespace: "istio-system", ConfigMap: "defaults", Problem: "p", Fix: "f"}}}
	assert.Equal(t, "platform check: 1 finding(s)\n  WaypointCannotStart: waypoint (namespace istio-system, ConfigMap defaults): p; fix: f", r.String())
	assert.Len(t, platform.FindingKinds(), 17)
	r = platform.Report{NotChecked: []string{"token Secrets"}}
	assert.Equal(t, "platform check: no findings\n  not checked: token Secrets", r.String())
}
