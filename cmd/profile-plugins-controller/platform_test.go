package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// logLines collects what a logger writes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// startPlatformCheck runs only the platform check in a manager, as the user bound to
// deploy/rbac/role.yaml, so a read the role does not grant fails the test.
func startPlatformCheck(t *testing.T, env *envtest.Env, cfg *config.Config, logs *logLines) *prometheus.GaugeVec {
	t.Helper()
	applyRoles(t, env.Client)
	as := rest.CopyConfig(env.Base)
	as.Impersonate = rest.ImpersonationConfig{UserName: rbacUser}
	mgr, err := ctrl.NewManager(as, ctrl.Options{
		Scheme:                 envtest.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Logger: funcr.New(func(prefix, args string) {
			logs.mu.Lock()
			logs.lines = append(logs.lines, prefix+" "+args)
			logs.mu.Unlock()
		}, funcr.Options{}),
	})
	require.NoError(t, err)
	gauge := NewPlatformFindings(prometheus.NewRegistry())
	// An hour: whatever the test sees within seconds came from the start or a watch.
	require.NoError(t, setupPlatformCheck(mgr, &PlatformCheck{Reader: mgr.GetAPIReader(), Config: cfg,
		Recorder: mgr.GetEventRecorder("profile-plugins-test"), Findings: gauge, Interval: time.Hour}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return gauge
}

// Issue 15: the reference controller runs the platform check at start and on changes, and
// reports through an event on the finding's Namespace, a log line and a gauge by kind.
func TestPlatformCheckReports(t *testing.T) {
	// The install's server: the check runs as the user of deploy/rbac/role.yaml, in namespace
	// kubeflow; and the platform below has the guard and the mesh root's default deny, which the
	// tests on the shared server must not meet.
	env := oneAtATime(t, installServer)
	c := env.Client
	ctx := context.Background()
	cfg := config.Default()
	cfg.Mesh.IstiodNamespace = "pc-istiod"
	cfg.Authorization.Principals.IngressGateway = "cluster.local/ns/pc-gateway/sa/gateway"
	cfg.Authorization.PlatformCallers = []config.PlatformCaller{{Name: "culler", Principal: "cluster.local/ns/pc-kubeflow/sa/culler", DataPlane: config.CallerAmbient}}
	cfg.PodSecurity.Enforce.Level = "restricted"
	cfg.Mesh.Waypoint.SeccompPatch = ptr.To(false)
	fixture.Platform(t, c, cfg)
	removeGuardAtEnd(t, c, cfg)
	classDefaults, err := waypoint.ClassDefaults(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, classDefaults), "the admin has not applied the class defaults yet")
	fixture.Label(t, c, "pc-kubeflow", map[string]*string{"istio.io/dataplane-mode": nil, "istio-injection": ptr.To("enabled")})
	require.NoError(t, c.Delete(ctx, fixture.MeshPod("pc-kubeflow", "culler-0", "culler", nil)))
	fixture.Ensure(t, c, fixture.MeshPod("pc-kubeflow", "culler-1", "culler", fixture.SidecarPod))

	logs := &logLines{}
	gauge := startPlatformCheck(t, env, cfg, logs)
	kind := func(k platform.FindingKind) func() bool {
		return func() bool { return testutil.ToFloat64(gauge.WithLabelValues(string(k))) == 1 }
	}
	require.Eventually(t, kind(platform.FindingDataPlaneMismatch), 20*time.Second, 100*time.Millisecond, "checked at start")
	require.Eventually(t, kind(platform.FindingWaypointCannotStart), 20*time.Second, 100*time.Millisecond)
	assert.Zero(t, testutil.ToFloat64(gauge.WithLabelValues(string(platform.FindingCallerNotInMesh))), "every kind is reported, absent ones as zero")
	assert.True(t, logs.has(`"msg"="platform finding"`, `"kind"="DataPlaneMismatch"`, `"what"="culler"`, "set dataPlane: sidecar for culler"), "%v", logs.lines)

	require.Eventually(t, func() bool {
		list := &eventsv1.EventList{}
		require.NoError(t, c.List(ctx, list))
		for _, e := range list.Items {
			if e.Regarding.Kind == "Namespace" && e.Regarding.Name == "pc-kubeflow" && e.Reason == PlatformReason &&
				e.Type == corev1.EventTypeWarning && e.Action == string(platform.FindingDataPlaneMismatch) &&
				strings.Contains(e.Note, "runs with a sidecar") {
				return true
			}
		}
		return false
	}, 20*time.Second, 100*time.Millisecond, "an event on the caller's Namespace")

	// The admin applies the class defaults: the watch on istiod's namespace re-runs the check.
	require.NoError(t, c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "pc-istiod", Name: "waypoint-defaults", Labels: map[string]string{waypoint.ClassDefaultsLabel: "istio-waypoint"}},
		Data:       map[string]string{"deployment": "spec:\n  template:\n    spec:\n      securityContext:\n        seccompProfile:\n          type: RuntimeDefault\n"},
	}))
	require.Eventually(t, func() bool { return !kind(platform.FindingWaypointCannotStart)() }, 20*time.Second, 100*time.Millisecond)
	assert.True(t, logs.has(`"msg"="platform finding resolved"`, `"kind"="WaypointCannotStart"`), "%v", logs.lines)

	// The caller's namespace moves to ambient: a Namespace event re-runs the check; with no pods
	// left the verdict comes from the labels.
	require.NoError(t, c.Delete(ctx, fixture.MeshPod("pc-kubeflow", "culler-1", "culler", nil)))
	fixture.Label(t, c, "pc-kubeflow", map[string]*string{"istio.io/dataplane-mode": ptr.To("ambient"), "istio-injection": nil})
	require.Eventually(t, func() bool { return !kind(platform.FindingDataPlaneMismatch)() }, 20*time.Second, 100*time.Millisecond)
}

// The check re-runs when any namespace it reads changes, the L4 exceptions' included.
func TestPlatformNamespacesAreWhatTheCheckReads(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Authorization.L4Exceptions = []config.L4Exception{{Namespaces: []string{"monitoring"}},
		{Principals: []string{"cluster.local/ns/tracing/sa/collector"}}, {ServiceAccounts: []string{"logging/fluent-bit"}}, {IPBlocks: []string{"10.8.3.4"}}}
	require.NoError(t, cfg.Validate())
	assert.Equal(t, []string{"istio-system", "kubeflow", "logging", "monitoring", "tracing"}, sets.List(platformNamespaces(cfg)))
}
