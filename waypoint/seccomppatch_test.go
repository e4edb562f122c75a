package waypoint_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

const patchName = "waypoint" + waypoint.SeccompPatchSuffix

func generate(t *testing.T, cfg *config.Config, labels map[string]string, observed ...client.Object) plugin.Desired {
	t.Helper()
	d, err := waypoint.New(cfg).Generate(plugin.Target{Namespace: ns, Observed: plugin.Observed{Labels: labels, Objects: observed}})
	require.NoError(t, err)
	return d
}

// desiredGateway and desiredPatch pick the Gateway and the patch ConfigMap out of Desired.Objects.
func desiredGateway(t *testing.T, d plugin.Desired) *gatewayv1.Gateway {
	t.Helper()
	for _, o := range d.Objects {
		if gw, ok := o.(*gatewayv1.Gateway); ok {
			return gw
		}
	}
	t.Fatal("no Gateway desired")
	return nil
}

func desiredPatch(d plugin.Desired) (*corev1.ConfigMap, int) {
	for i, o := range d.Objects {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == patchName {
			return cm, i
		}
	}
	return nil, -1
}

func refName(gw *gatewayv1.Gateway) string {
	if gw.Spec.Infrastructure == nil || gw.Spec.Infrastructure.ParametersRef == nil {
		return ""
	}
	return gw.Spec.Infrastructure.ParametersRef.Name
}

// ourPatch is the per-namespace ConfigMap as the runner applied it.
func ourPatch(cfg *config.Config) *corev1.ConfigMap {
	cm := waypoint.SeccompConfigMap(cfg, ns)
	cm.Labels = map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: waypoint.PluginName}
	return cm
}

// By default a namespace gets no ConfigMap and its Gateway no parametersRef: the class defaults in
// istiod's namespace harden every waypoint. The opt-in brings both back, with a warning that says
// what namespace editors can do through it and points to the class defaults.
func TestPerNamespacePatchIsAnOptInThatWarns(t *testing.T) {
	cfg := config.Default()
	d := generate(t, cfg, nil, programmed(cfg))
	cm, _ := desiredPatch(d)
	assert.Nil(t, cm)
	assert.Empty(t, refName(desiredGateway(t, d)))
	for _, w := range d.Warnings {
		assert.NotContains(t, w, "seccompPatch")
	}

	cfg = fixture.Config(t, "mesh: {waypoint: {seccompPatch: true}, istiodNamespace: istiod}\n")
	d = generate(t, cfg, nil, programmed(cfg))
	cm, _ = desiredPatch(d)
	require.NotNil(t, cm)
	assert.Equal(t, patchName, refName(desiredGateway(t, d)))
	warnings := strings.Join(d.Warnings, "\n")
	for _, want := range []string{"mesh.waypoint.seccompPatch is on", "namespace editors", "ConfigMap " + ns + "/" + patchName,
		"image, containers", "owner's L7 policy", "class defaults in istiod", "render -cluster"} {
		assert.Contains(t, warnings, want)
	}
}

// The waiting message of a waypoint that is not Programmed names the likely cause under enforce
// "restricted" without the per-namespace patch, and both fixes.
func TestWaitingMessageUnderRestrictedNamesTheClassDefaults(t *testing.T) {
	notProgrammed := func(cfg *config.Config) client.Object {
		gw := programmed(cfg)
		gw.Status.Conditions[0].Status, gw.Status.Conditions[0].Reason = metav1.ConditionFalse, "Pending"
		return gw
	}
	restricted := map[string]string{psaapi.EnforceLevelLabel: "restricted"}
	baseline := map[string]string{psaapi.EnforceLevelLabel: "baseline"}
	cases := []struct {
		name   string
		config string
		labels map[string]string
		hint   bool
	}{
		{"restricted label", "", restricted, true},
		{"no label yet, restricted configured", "podSecurity: {enforce: {level: restricted}}\n", nil, true},
		{"baseline label", "podSecurity: {enforce: {level: restricted}}\n", baseline, false},
		{"baseline", "", nil, false},
		{"restricted with the per-namespace patch", "mesh: {waypoint: {seccompPatch: true}}\n", restricted, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fixture.Config(t, tc.config)
			for _, observed := range [][]client.Object{nil, {notProgrammed(cfg)}} {
				d := generate(t, cfg, tc.labels, observed...)
				require.NotEmpty(t, d.Waiting)
				waiting := strings.Join(d.Waiting, "\n")
				assert.Contains(t, waiting, waypoint.WaitingForWaypoint)
				parts := []string{"PodSecurity rejects the waypoint pods unless", "gateway.istio.io/defaults-for-class=istio-waypoint",
					"namespace istio-system", "render -cluster", "mesh.waypoint.seccompPatch: true"}
				for _, p := range parts {
					if tc.hint {
						assert.Contains(t, waiting, p)
					} else {
						assert.NotContains(t, waiting, p)
					}
				}
			}
		})
	}
}

// Upgrade from a release that patched every namespace: the Gateway drops its parametersRef
// first, and the ConfigMap it referenced stays wanted (so it is not pruned, and still required
// for routing) until the observed Gateway no longer references it.
func TestUpgradeKeepsThePatchUntilTheGatewayDropsTheReference(t *testing.T) {
	old := fixture.Config(t, "mesh: {waypoint: {seccompPatch: true}}\n")
	cfg := config.Default()
	d := generate(t, cfg, nil, programmed(old), ourPatch(old))
	cm, i := desiredPatch(d)
	require.NotNil(t, cm, "the ConfigMap the observed Gateway references is pruned in the call that updates the Gateway")
	assert.Equal(t, 0, i, "the ConfigMap comes before the Gateway")
	assert.Empty(t, refName(desiredGateway(t, d)), "the Gateway loses its parametersRef")
	assert.Contains(t, strings.Join(d.Waiting, "\n"), "ConfigMap "+ns+"/"+patchName+" (mesh.waypoint.seccompPatch is off) is pruned once Gateway waypoint no longer references it")
	assert.Contains(t, d.LabelRequires["istio.io/use-waypoint"], plugin.Ref{GroupKind: cm.GroupVersionKind().GroupKind(), Name: patchName})

	// The Gateway no longer references it: the ConfigMap is no longer wanted, so the runner prunes it.
	d = generate(t, cfg, nil, programmed(cfg), ourPatch(old))
	cm, _ = desiredPatch(d)
	assert.Nil(t, cm)
	assert.Empty(t, d.Waiting)

	// Another writer's ConfigMap of that name is never the plugin's to keep.
	foreign := waypoint.SeccompConfigMap(old, ns)
	d = generate(t, cfg, nil, programmed(old), foreign)
	cm, _ = desiredPatch(d)
	assert.Nil(t, cm)
}

// With the opt-in on, the Gateway references the ConfigMap only when that cannot patch the
// waypoint from another writer's ConfigMap or a missing one.
func TestOptInReferencesOnlyThePluginsConfigMap(t *testing.T) {
	cfg := fixture.Config(t, "mesh: {waypoint: {seccompPatch: true}}\n")
	unpatched := programmed(config.Default())
	gwRef := plugin.Ref{GroupKind: unpatched.GroupVersionKind().GroupKind(), Name: "waypoint"}
	cmRef := plugin.Ref{GroupKind: (&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap"}}).GroupVersionKind().GroupKind(), Name: patchName}
	foreign := waypoint.SeccompConfigMap(cfg, ns)
	cases := []struct {
		name     string
		observed []client.Object
		ref      bool
		// wait is what the Waiting message says, "" for none.
		wait string
	}{
		{"new namespace: the Gateway is created after the ConfigMap", nil, true, ""},
		{"existing Gateway, ConfigMap not made yet", []client.Object{unpatched}, false, "references ConfigMap " + patchName + " (mesh.waypoint.seccompPatch) only once"},
		{"existing Gateway, the plugin's ConfigMap", []client.Object{unpatched, ourPatch(cfg)}, true, ""},
		{"Gateway references the plugin's ConfigMap, which was deleted", []client.Object{programmed(cfg)}, true, ""},
		{"another writer's ConfigMap, no Gateway yet", []client.Object{foreign}, false, "does not reference ConfigMap " + patchName + " (mesh.waypoint.seccompPatch) while another writer's holds its name"},
		{"another writer's ConfigMap, Gateway references it", []client.Object{programmed(cfg), foreign}, false, "does not reference ConfigMap " + patchName + " (mesh.waypoint.seccompPatch) while another writer's holds its name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := generate(t, cfg, nil, tc.observed...)
			cm, i := desiredPatch(d)
			require.NotNil(t, cm)
			assert.Equal(t, 0, i, "the ConfigMap comes before the Gateway")
			gw := desiredGateway(t, d)
			if tc.ref {
				assert.Equal(t, patchName, refName(gw))
				assert.Contains(t, d.CreateRequires[gwRef], cmRef, "a new Gateway waits for the plugin's ConfigMap")
			} else {
				assert.Empty(t, refName(gw))
				assert.NotContains(t, d.CreateRequires[gwRef], cmRef)
			}
			waiting := strings.Join(d.Waiting, "\n")
			if tc.wait == "" {
				assert.NotContains(t, waiting, "ConfigMap "+patchName+" (mesh.waypoint.seccompPatch)")
			} else {
				assert.Contains(t, waiting, tc.wait)
			}
			// Once the waypoint is Programmed, routing requires the plugin's intact ConfigMap, and
			// is wanted only through a Gateway that references it.
			if _, programmed := plugin.Lookup[*gatewayv1.Gateway](plugin.Observed{Objects: tc.observed}, "waypoint"); programmed {
				_, routed := d.Labels["istio.io/use-waypoint"]
				assert.Equal(t, tc.ref, routed, "use-waypoint wanted")
				if tc.ref {
					assert.Contains(t, d.LabelRequires["istio.io/use-waypoint"], cmRef)
				}
			}
		})
	}
}

// The plugin reads no other writer's ConfigMap: a controller's cache holds only the plugins' own,
// trimmed, and the runner reads the seccomp patch in full past it.
func TestPluginCachesOnlyThePluginsConfigMaps(t *testing.T) {
	decl := waypoint.New(config.Default()).CacheByObject()
	require.Len(t, decl, 1)
	for obj, by := range decl {
		assert.IsType(t, &corev1.ConfigMap{}, obj)
		assert.Equal(t, plugin.ManagedSelector().String(), by.Label.String())
		out, err := by.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}})
		require.NoError(t, err)
		assert.Empty(t, out.(*corev1.ConfigMap).Data)
	}
}
