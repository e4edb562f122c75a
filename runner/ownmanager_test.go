package runner_test

// Drift applied under the plugin's own field manager name (internal/safety/FINDINGS-2.md, finding 1): the API
// server does not tie a manager name to an identity, so such an apply is another writer's.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

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
			m.writes = nil
			res = m.apply()
			require.NoError(t, res.Err())
			assert.Empty(t, m.writes, "restored once, quiet after")
			assert.Empty(t, res.Warnings())
		})
	}
}

// A key added to the opt-in seccomp ConfigMap under the waypoint's manager is data drift.
func TestImpersonatedFieldManagerKeyInThePatchConfigMap(t *testing.T) {
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
