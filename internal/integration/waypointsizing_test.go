package integration

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// overlayLikeIstiod applies the ConfigMaps' key to base, in order, as strategic merge patches:
// what istiod's gateway deployment controller does with the class defaults and then the Gateway's
// parametersRef (istio/istio pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go, render
// and applyOverlay). It reports false when no ConfigMap has the key, for the kinds istiod then
// leaves out (requiredOverlays: horizontalPodAutoscaler, podDisruptionBudget).
func overlayLikeIstiod[T any](t *testing.T, base *T, key string, cms ...map[string]string) (*T, bool) {
	t.Helper()
	doc, err := yaml.Marshal(base)
	require.NoError(t, err)
	js, err := yaml.YAMLToJSON(doc)
	require.NoError(t, err)
	applied := false
	for _, data := range cms {
		overlay, ok := data[key]
		if !ok {
			continue
		}
		patch, err := yaml.YAMLToJSON([]byte(overlay))
		require.NoError(t, err)
		js, err = strategicpatch.StrategicMergePatch(js, patch, new(T))
		require.NoError(t, err, "istiod fails the render on an overlay that does not patch")
		applied = true
	}
	out := new(T)
	require.NoError(t, yaml.Unmarshal(js, out))
	return out, applied
}

// The objects istiod's waypoint template renders (manifests/charts/istio-control/istio-discovery/
// files/waypoint.yaml): the Deployment as in testdata, and the skeletons of the autoscaler and the
// budget that only an overlay makes real.
func waypointTemplate(t *testing.T, ns string) (*appsv1.Deployment, *autoscalingv2.HorizontalPodAutoscaler, *policyv1.PodDisruptionBudget) {
	t.Helper()
	data, err := os.ReadFile("../../testdata/waypoint/istio-waypoint-deployment.yaml")
	require.NoError(t, err)
	d := &appsv1.Deployment{}
	require.NoError(t, yaml.UnmarshalStrict(data, d))
	d.Namespace = ns
	d.Spec.Template.Labels["gateway.networking.k8s.io/gateway-class-name"] = config.DefaultWaypointClassName
	meta := metav1.ObjectMeta{Name: d.Name, Namespace: ns}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: meta,
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name},
			MaxReplicas:    1,
		},
	}
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta,
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"gateway.networking.k8s.io/gateway-name": d.Name}}},
	}
	return d, hpa, pdb
}

// What the class defaults make of Istio's waypoint, for the default sizing and an HA one, is
// accepted by the real API server (its validation of pod templates, topology spread with
// matchLabelKeys, autoscalers and budgets), and carries the configured sizes.
func TestWaypointSizingIsAcceptedByTheAPIServer(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	ctx := context.Background()
	for name, c := range map[string]struct {
		waypoint     string
		replicas     int32
		hpa, pdb     bool
		spread       bool
		memoryLimit  string
		minAvailable bool
	}{
		"default":         {waypoint: "{}", replicas: 1, memoryLimit: "1Gi"},
		"two replicas":    {waypoint: "{replicas: 2}", replicas: 2, pdb: true, spread: true, memoryLimit: "1Gi"},
		"autoscaled":      {waypoint: "{resources: {limits: {memory: 512Mi}}, autoscaling: {minReplicas: 2, maxReplicas: 4}}", replicas: 1, hpa: true, pdb: true, spread: true, memoryLimit: "512Mi"},
		"min available":   {waypoint: "{replicas: 3, podDisruptionBudget: {minAvailable: 2}}", replicas: 3, pdb: true, spread: true, memoryLimit: "1Gi", minAvailable: true},
		"autoscaled to 1": {waypoint: "{autoscaling: {minReplicas: 1, maxReplicas: 3}}", replicas: 1, hpa: true, spread: true, memoryLimit: "1Gi"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := config.Parse([]byte("apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\nmesh:\n  waypoint: " + c.waypoint + "\n"))
			require.NoError(t, err)
			cm, err := waypoint.ClassDefaults(cfg)
			require.NoError(t, err)
			ns := "sizing-" + sanitize(name)
			ensureNamespace(t, env.Client, ns)
			baseD, baseHPA, basePDB := waypointTemplate(t, ns)

			d, _ := overlayLikeIstiod(t, baseD, "deployment", cm.Data)
			require.NoError(t, env.Client.Create(ctx, d), "the API server refuses the waypoint Deployment")
			assert.Equal(t, c.replicas, ptrOr(d.Spec.Replicas, 1))
			proxy := d.Spec.Template.Spec.Containers[0]
			assert.Equal(t, "istio-proxy", proxy.Name)
			assert.Len(t, d.Spec.Template.Spec.Containers, 1, "the patch adds no container")
			assert.NotEmpty(t, proxy.Image, "the patch keeps the rest of the proxy container")
			assert.Equal(t, resource.MustParse(c.memoryLimit), proxy.Resources.Limits[corev1.ResourceMemory])
			assert.Equal(t, resource.MustParse("100m"), proxy.Resources.Requests[corev1.ResourceCPU])
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, d.Spec.Template.Spec.SecurityContext.SeccompProfile.Type)
			assert.Equal(t, c.spread, len(d.Spec.Template.Spec.TopologySpreadConstraints) == 1)

			hpa, made := overlayLikeIstiod(t, baseHPA, "horizontalPodAutoscaler", cm.Data)
			assert.Equal(t, c.hpa, made, "istiod makes an autoscaler only from an overlay")
			if made {
				require.NoError(t, env.Client.Create(ctx, hpa), "the API server refuses the autoscaler")
				assert.Equal(t, cfg.Mesh.Waypoint.Autoscaling.MinReplicas, *hpa.Spec.MinReplicas)
				assert.Equal(t, cfg.Mesh.Waypoint.Autoscaling.MaxReplicas, hpa.Spec.MaxReplicas)
				assert.Equal(t, "Deployment", hpa.Spec.ScaleTargetRef.Kind, "the patch keeps the template's target")
			}
			pdb, made := overlayLikeIstiod(t, basePDB, "podDisruptionBudget", cm.Data)
			assert.Equal(t, c.pdb, made, "istiod makes a budget only from an overlay")
			if made {
				require.NoError(t, env.Client.Create(ctx, pdb), "the API server refuses the budget")
				assert.Equal(t, c.minAvailable, pdb.Spec.MinAvailable != nil)
				assert.NotNil(t, pdb.Spec.Selector, "the patch keeps the template's selector")
			}
		})
	}
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func sanitize(s string) string {
	out := []byte(s)
	for i, b := range out {
		if b == ' ' {
			out[i] = '-'
		}
	}
	return string(out)
}

// A Profile granted a larger waypoint gets it on top of the class defaults, merged as istiod merges
// them (class defaults first, then the Gateway's parametersRef ConfigMap), and the objects that
// makes are accepted by the real API server; the admin's budget keeps its one bound.
func TestProfileSizingMergesOverTheClassDefaults(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	ctx := context.Background()
	cfg, err := config.Parse([]byte(`apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1
kind: PluginConfig
mesh:
  waypoint:
    replicas: 2
    podDisruptionBudget: {minAvailable: 1}
    sizingOverrides: [{namespaceSelector: {matchLabels: {tier: large}}, maximum: {replicas: 4, resources: {memory: 2Gi}}}]
`))
	require.NoError(t, err)
	class, err := waypoint.ClassDefaults(cfg)
	require.NoError(t, err)
	const ns = "sizing-profile"
	ensureNamespace(t, env.Client, ns)
	raw, err := yaml.YAMLToJSON([]byte("{replicas: 4, resources: {limits: {memory: 2Gi}}}"))
	require.NoError(t, err)
	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: profilev1.ProfileSpec{Plugins: []profilev1.Plugin{{TypeMeta: metav1.TypeMeta{Kind: waypoint.ProfileKind}, Spec: &runtime.RawExtension{Raw: raw}}}}}
	d, err := waypoint.New(cfg).Generate(plugin.Target{Namespace: ns, Profile: profile, Observed: plugin.Observed{Labels: map[string]string{"tier": "large"}}})
	require.NoError(t, err)
	require.Empty(t, d.Errors)
	var params *corev1.ConfigMap
	for _, o := range d.Objects {
		if cm, ok := o.(*corev1.ConfigMap); ok {
			params = cm
		}
	}
	require.NotNil(t, params, "the granted sizing reaches istiod through the parametersRef ConfigMap")
	params.Labels = map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue}
	require.NoError(t, env.Client.Create(ctx, params), "the API server refuses the parametersRef ConfigMap")

	baseD, _, basePDB := waypointTemplate(t, ns)
	dep, _ := overlayLikeIstiod(t, baseD, "deployment", class.Data, params.Data)
	require.NoError(t, env.Client.Create(ctx, dep))
	assert.Equal(t, int32(4), *dep.Spec.Replicas, "the Profile's count wins over the class's 2")
	limits := dep.Spec.Template.Spec.Containers[0].Resources.Limits
	assert.Equal(t, resource.MustParse("2Gi"), limits[corev1.ResourceMemory])
	assert.Equal(t, resource.MustParse("2"), limits[corev1.ResourceCPU], "what the Profile did not ask for stays the class's")
	assert.Len(t, dep.Spec.Template.Spec.TopologySpreadConstraints, 1, "the spread is merged by topologyKey, not doubled")
	pdb, made := overlayLikeIstiod(t, basePDB, "podDisruptionBudget", class.Data, params.Data)
	require.True(t, made)
	require.NoError(t, env.Client.Create(ctx, pdb), "the merged budget has both bounds, which the API server refuses")
	assert.Nil(t, pdb.Spec.MaxUnavailable)
	assert.Equal(t, 1, pdb.Spec.MinAvailable.IntValue())
}

// The admin switches the class defaults from minAvailable to maxUnavailable (or back) while a
// namespace's parametersRef ConfigMap, from the controller's configuration before or after the
// switch, still names the other bound: istiod merges both (class defaults first), and the
// budget it then applies must still be one the API server accepts, the namespace's own bound.
func TestBudgetSwitchInTheClassDefaultsKeepsProfileBudgetsAccepted(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	ctx := context.Background()
	parse := func(budget string) *config.Config {
		cfg, err := config.Parse([]byte(`apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1
kind: PluginConfig
mesh:
  waypoint:
    replicas: 3
    podDisruptionBudget: ` + budget + `
    sizingOverrides: [{namespaceSelector: {matchLabels: {tier: large}}, maximum: {replicas: 4}}]
`))
		require.NoError(t, err)
		return cfg
	}
	minAvailable, maxUnavailable := parse("{minAvailable: 2}"), parse("{maxUnavailable: 1}")
	for name, c := range map[string]struct {
		class, controller *config.Config
		wantMin           bool
	}{
		"class now maxunavailable": {class: maxUnavailable, controller: minAvailable, wantMin: true},
		"class now minavailable":   {class: minAvailable, controller: maxUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			class, err := waypoint.ClassDefaults(c.class)
			require.NoError(t, err)
			ns := "budget-" + sanitize(name)
			ensureNamespace(t, env.Client, ns)
			raw, err := yaml.YAMLToJSON([]byte("{replicas: 4}"))
			require.NoError(t, err)
			profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns},
				Spec: profilev1.ProfileSpec{Plugins: []profilev1.Plugin{{TypeMeta: metav1.TypeMeta{Kind: waypoint.ProfileKind}, Spec: &runtime.RawExtension{Raw: raw}}}}}
			d, err := waypoint.New(c.controller).Generate(plugin.Target{Namespace: ns, Profile: profile, Observed: plugin.Observed{Labels: map[string]string{"tier": "large"}}})
			require.NoError(t, err)
			require.Empty(t, d.Errors)
			var params *corev1.ConfigMap
			for _, o := range d.Objects {
				if cm, ok := o.(*corev1.ConfigMap); ok {
					params = cm
				}
			}
			require.NotNil(t, params)
			params.Labels = map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue}
			require.NoError(t, env.Client.Create(ctx, params), "the API server refuses the parametersRef ConfigMap")

			_, _, basePDB := waypointTemplate(t, ns)
			pdb, made := overlayLikeIstiod(t, basePDB, "podDisruptionBudget", class.Data, params.Data)
			require.True(t, made)
			require.NoError(t, env.Client.Create(ctx, pdb), "istiod's merged budget is refused: class %q, namespace %q",
				class.Data["podDisruptionBudget"], params.Data["podDisruptionBudget"])
			assert.Equal(t, c.wantMin, pdb.Spec.MinAvailable != nil, "the namespace's own bound")
			assert.Equal(t, !c.wantMin, pdb.Spec.MaxUnavailable != nil, "the namespace's own bound")
		})
	}
}
