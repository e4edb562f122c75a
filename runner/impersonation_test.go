package runner_test

// Drift applied under the plugin's own field manager name (internal/safety/FINDINGS-2.md, finding
// 1): the API server does not tie a manager name to an identity, so such an apply is another
// writer's, restored and reported like any drift. The FINDING comments keep the security review's
// finding of each scenario.

import (
	"context"
	"strings"
	"testing"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// impersonatedApply re-applies obj as it stands, plus change, under the plugin's own field
// manager name, as anyone who may patch the object can.
func impersonatedApply(t *testing.T, c client.Client, obj client.Object, pluginName string, change func(map[string]any)) {
	t.Helper()
	fixture.ApplyAs(t, c, obj, plugin.FieldManager(pluginName), change)
}

// FINDING (fail-open, namespace editor who may patch Gateways). With the default cluster-scope
// hardening the waypoint Gateway has no spec.infrastructure. An editor adds a parametersRef to a
// ConfigMap of their own (istiod applies its keys to the waypoint Deployment: image, containers)
// by a server-side apply under the field manager profile-plugins/waypoint. Drift detection counts
// only fields of *other* managers (or Updates), and "no write when nothing changed" compares the
// observed object as a superset of the apply body, so the runner sees its own Gateway, unchanged:
// no write, no warning, and istio.io/use-waypoint stays, routing every request through a waypoint
// built from the editor's ConfigMap. The README promises the library "repairs its own fields on
// the next reconcile" (TestApplyRepairsDrift); here it never does.
func TestImpersonatedFieldManagerCannotAddParametersRefToTheRoutedWaypoint(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.enrol()
	require.NoError(t, m.c.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "editor-patch", Namespace: ns},
		Data:       map[string]string{"deployment": "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        image: evil/proxy:1\n"},
	}))
	gw := &gatewayv1.Gateway{}
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
	require.Nil(t, gw.Spec.Infrastructure, "the default waypoint references no ConfigMap")
	impersonatedApply(t, m.c, gw, waypoint.PluginName, func(u map[string]any) {
		u["spec"].(map[string]any)["infrastructure"] = map[string]any{
			"parametersRef": map[string]any{"group": "", "kind": "ConfigMap", "name": "editor-patch"},
		}
	})
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
	require.NotNil(t, gw.Spec.Infrastructure, "the attack took effect on the server")

	m.writes = nil
	res := m.apply()
	require.NoError(t, res.Err())
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
	routed := m.labels()[useWaypoint] != ""
	refs := gw.Spec.Infrastructure != nil && gw.Spec.Infrastructure.ParametersRef != nil
	assert.False(t, routed && refs,
		"istio.io/use-waypoint routes through a waypoint whose Gateway references the editor's ConfigMap %v; writes %v; warnings %q",
		gw.Spec.Infrastructure, m.writes, strings.Join(res.Warnings(), "\n"))
}

// FINDING (fail-open, anyone who may patch AuthorizationPolicies in the namespace). The same
// impersonation on the ztunnel policy: a spec.selector added under the field manager
// profile-plugins/authz narrows the namespace-wide ALLOW policy to the pods it selects, so every
// other pod has no ALLOW policy and ztunnel admits every caller to it, past the waypoint. The
// runner sees its own policy as a superset of what it wants and writes nothing, reports nothing,
// and keeps istio.io/dataplane-mode and istio.io/use-waypoint. (The README puts other writers of
// AuthorizationPolicies out of scope, but promises that the library repairs its own fields on the
// next reconcile; guarantee 10 (docs/security/guarantees.md) promises that what switches a
// protective object off is restored and reported.)
func TestImpersonatedFieldManagerCannotNarrowTheZtunnelPolicyOfAnEnrolledNamespace(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.enrol()
	impersonatedApply(t, m.c, m.policy(ztunnelName), "authz", func(u map[string]any) {
		u["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": map[string]any{"app": "nothing"}}
	})
	require.NotNil(t, m.policy(ztunnelName).Spec.Selector, "the attack took effect on the server")

	m.writes = nil
	res := m.apply()
	require.NoError(t, res.Err())
	narrowed := m.policy(ztunnelName).Spec.Selector != nil
	enrolledStill := m.labels()[dataplaneMode] == "ambient"
	assert.False(t, narrowed && enrolledStill,
		"the ztunnel policy selects only app=nothing while the namespace stays in ambient: every other pod is open; writes %v; warnings %q",
		m.writes, strings.Join(res.Warnings(), "\n"))
}

// impersonation is one content field added by an apply under the plugin's own manager name.
type impersonation struct {
	plugin string
	object func(*mesh) client.Object
	change func(map[string]any)
	path   string // as the warning names it
	gone   func(*mesh) bool
}

func impersonations() map[string]impersonation {
	spec := func(u map[string]any) map[string]any { return u["spec"].(map[string]any) }
	return map[string]impersonation{
		"ztunnel policy selector": {
			plugin: authz.PluginName,
			object: func(m *mesh) client.Object { return m.policy(ztunnelName) },
			change: func(u map[string]any) {
				spec(u)["selector"] = map[string]any{"matchLabels": map[string]any{"app": "nothing"}}
			},
			path: "spec.selector",
			gone: func(m *mesh) bool { return m.policy(ztunnelName).Spec.Selector == nil },
		},
		"owner policy dry-run": {
			plugin: authz.PluginName,
			object: func(m *mesh) client.Object { return m.policy(ownerName) },
			change: func(u map[string]any) {
				u["metadata"].(map[string]any)["annotations"].(map[string]any)[dryRun] = "true"
			},
			path: "metadata.annotations.istio.io/dry-run",
			gone: func(m *mesh) bool { return m.policy(ownerName).Annotations[dryRun] == "false" },
		},
		"waypoint parametersRef": {
			plugin: waypoint.PluginName,
			object: func(m *mesh) client.Object { return m.gateway() },
			change: func(u map[string]any) {
				spec(u)["infrastructure"] = map[string]any{
					"parametersRef": map[string]any{"group": "", "kind": "ConfigMap", "name": "editor-patch"},
				}
			},
			path: "spec.infrastructure",
			gone: func(m *mesh) bool { return m.gateway().Spec.Infrastructure == nil },
		},
		"waypoint extra listener": {
			plugin: waypoint.PluginName,
			object: func(m *mesh) client.Object { return m.gateway() },
			change: func(u map[string]any) {
				spec(u)["listeners"] = append(spec(u)["listeners"].([]any),
					map[string]any{"name": "open", "port": int64(80), "protocol": "HTTP"})
			},
			path: "spec.listeners",
			gone: func(m *mesh) bool { return len(m.gateway().Spec.Listeners) == 1 },
		},
	}
}

// Each field is restored away in the same call and reported with its path; the namespace stays in
// ambient, routing waits for the next call (for the Gateway: until istiod reports the restored
// generation Programmed), and the call after writes nothing and warns of nothing.
func TestImpersonatedFieldManagerDriftIsRestoredAndReported(t *testing.T) {
	t.Parallel()
	for name, tc := range impersonations() {
		t.Run(name, func(t *testing.T) {
			m := newMesh(t)
			m.enrol()
			obj := tc.object(m)
			impersonatedApply(t, m.c, obj, tc.plugin, tc.change)
			require.False(t, tc.gone(m), "the attack took effect")

			res := m.apply()
			require.NoError(t, res.Err())
			assert.True(t, tc.gone(m), "the impersonated field stays; writes %v", m.writes)
			assert.Contains(t, strings.Join(res.Warnings(), "\n"),
				"was changed by a writer using the plugin's own field manager profile-plugins/"+tc.plugin+" (set "+tc.path+")")
			restoredNotRouted(t, m.labels())

			if tc.plugin == waypoint.PluginName {
				m.program()
			}
			require.NoError(t, m.apply().Err())
			enrolled(t, m.labels())
			assert.Empty(t, m.converged("restored once, quiet after").Warnings())
		})
	}
}

// A key added to the opt-in seccomp ConfigMap under the waypoint's manager is data drift.
func TestImpersonatedFieldManagerKeyInThePatchConfigMap(t *testing.T) {
	t.Parallel()
	m := newMesh(t).withPatch()
	m.enrol()
	key := client.ObjectKey{Namespace: ns, Name: "waypoint-seccomp"}
	cm := &corev1.ConfigMap{}
	require.NoError(t, m.c.Get(context.Background(), key, cm))
	want := cm.Data
	impersonatedApply(t, m.c, cm, waypoint.PluginName, func(u map[string]any) {
		u["data"].(map[string]any)["service"] = "spec:\n  type: LoadBalancer\n"
	})
	res := m.apply()
	require.NoError(t, res.Err())
	require.NoError(t, m.c.Get(context.Background(), key, cm))
	assert.Equal(t, want, cm.Data)
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "ConfigMap/waypoint-seccomp was changed by a writer using the plugin's own field manager profile-plugins/waypoint (set data.service)")
	restoredNotRouted(t, m.labels())
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
}

// When the restore fails, the narrowed ztunnel policy does not count as protecting: routing is
// withdrawn (the data-plane label stays only while pods run, as for any failed restore), and the
// next call restores it.
func TestFailedRestoreOfImpersonatedDriftWithdrawsRouting(t *testing.T) {
	t.Parallel()
	tc := impersonations()["ztunnel policy selector"]
	m := newMesh(t)
	m.enrol()
	impersonatedApply(t, m.c, tc.object(m), tc.plugin, tc.change)
	m.fail = failPolicyWrites(ztunnelName)
	res := m.apply()
	require.Error(t, res.Err())
	labels := m.labels()
	assert.NotContains(t, labels, useWaypoint)
	assert.NotContains(t, labels, ingressUseWaypoint)
	assert.NotContains(t, labels, dataplaneMode, "no pod runs: the namespace leaves ambient")

	m.fail = nil
	require.NoError(t, m.apply().Err())
	assert.True(t, tc.gone(m))
	assert.Equal(t, "ambient", m.labels()[dataplaneMode])
}

// A field the plugin itself stops setting (the owner policy's targetRefs in sidecar mode) is
// taken away by the apply without a warning: the observed desired-hash is not the new body's.
func TestAFieldThePluginStopsSettingIsNoImpersonation(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.enrol()
	require.NotEmpty(t, m.policy(ownerName).Spec.TargetRefs)
	m.configure(config.ModeSidecar)
	res := m.apply()
	require.NoError(t, res.Err())
	assert.Empty(t, m.policy(ownerName).Spec.TargetRefs)
	assert.NotContains(t, strings.Join(res.Warnings(), "\n"), "own field manager")
}

// While a withdrawal failed, existing objects are left as they are for the call; one that holds
// content the plugin does not set, applied under its own manager, does not count as protecting.
func TestImpersonatedDriftLeftAsItIsDoesNotProtect(t *testing.T) {
	t.Parallel()
	tc := impersonations()["ztunnel policy selector"]
	m := newMesh(t)
	m.enrol()
	impersonatedApply(t, m.c, tc.object(m), tc.plugin, tc.change)
	m.cfg.Mesh.Waypoint.Name = "waypoint-2" // use-waypoint changes: withdrawn first
	m.configure(config.ModeAmbient)
	failed := false
	m.fail = func(verb string, obj any) error {
		if !failed && strings.HasPrefix(describe(obj), "labels ") {
			failed = true
			return apierrors.NewServiceUnavailable("injected")
		}
		return nil
	}
	res := m.apply()
	require.Error(t, res.Err())
	require.False(t, tc.gone(m), "left as it is in this call")
	assert.NotEqual(t, "ambient", m.labels()[dataplaneMode], "no pod runs, and the narrowed policy protects nothing")

	m.fail = nil
	require.NoError(t, m.apply().Err())
	assert.True(t, tc.gone(m))
}

// A value changed under the plugin's own manager is undone only by the plugin's apply: while that
// apply fails, the object holds the changed value and does not protect (here no pod runs, so the
// namespace also leaves ambient, as for any failed restore).
func TestAValueChangedUnderThePluginsManagerDoesNotProtectWhileItsApplyFails(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.enrol()
	impersonatedApply(t, m.c, m.policy(ztunnelName), "authz", func(u map[string]any) {
		u["spec"].(map[string]any)["action"] = "AUDIT"
	})
	m.fail = failVerb("apply", "AuthorizationPolicy/"+ztunnelName)
	res := m.apply()
	require.Error(t, res.Err())
	labels := m.labels()
	assert.NotContains(t, labels, dataplaneMode, "enrolled behind a policy in AUDIT")
	assert.NotContains(t, labels, useWaypoint)

	m.fail = nil
	require.NoError(t, m.apply().Err())
	assert.Equal(t, "ALLOW", m.policy(ztunnelName).Spec.Action.String())
	assert.Equal(t, "ambient", m.labels()[dataplaneMode])
}
