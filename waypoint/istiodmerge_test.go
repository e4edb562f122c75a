package waypoint_test

import (
	"fmt"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// istiodPDB is a model of what istiod 1.30.3 renders as a waypoint's PodDisruptionBudget spec,
// written from istio/istio and apart from the plugin's code: the template's budget holds only the
// selector (manifests/charts/istio-control/istio-discovery/files/waypoint.yaml); render applies the
// "podDisruptionBudget" key of the class defaults ConfigMap and then of the Gateway's
// parametersRef ConfigMap, each as a strategic merge patch of the YAML (sigs.k8s.io/yaml into a
// map, then strategicpatch.StrategicMergeMapPatchUsingLookupPatchMeta with the patch metadata of
// policyv1.PodDisruptionBudget: strategicMergePatchYAML), and keeps the budget only when some
// overlay has the key (applyOverlay, requiredOverlays), all in
// pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go. A null in a patch deletes the key.
func istiodPDB(overlays ...map[string]string) (spec map[string]any, rendered bool, err error) {
	object := map[string]any{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"gateway.networking.k8s.io/gateway-name": "waypoint"}}}}
	meta, err := strategicpatch.NewPatchMetaFromStruct(&policyv1.PodDisruptionBudget{})
	if err != nil {
		return nil, false, err
	}
	for _, data := range overlays {
		overlay, ok := data["podDisruptionBudget"]
		if !ok {
			continue
		}
		patch := map[string]any{}
		if err := yaml.Unmarshal([]byte(overlay), &patch); err != nil {
			return nil, false, err
		}
		if object, err = strategicpatch.StrategicMergeMapPatchUsingLookupPatchMeta(object, patch, meta); err != nil {
			return nil, false, err
		}
		rendered = true
	}
	spec, _ = object["spec"].(map[string]any)
	return spec, rendered, nil
}

// sizingYAML draws an admin's waypoint sizing, valid for the configuration's validation: a
// replica count or autoscaling, and no budget, minAvailable below the smallest size, or
// maxUnavailable of at least 1.
func sizingYAML(t *rapid.T, label string) string {
	least := rapid.Int32Range(1, 3).Draw(t, label+"Least")
	s := fmt.Sprintf("replicas: %d", least)
	if rapid.Bool().Draw(t, label+"Autoscaled") {
		s = fmt.Sprintf("autoscaling: {minReplicas: %d, maxReplicas: %d}", least, least+rapid.Int32Range(0, 2).Draw(t, label+"Headroom"))
	}
	switch rapid.IntRange(0, 2).Draw(t, label+"Budget") {
	case 1:
		s += fmt.Sprintf(", podDisruptionBudget: {minAvailable: %d}", rapid.Int32Range(0, least-1).Draw(t, label+"MinAvailable"))
	case 2:
		s += fmt.Sprintf(", podDisruptionBudget: {maxUnavailable: %d}", rapid.Int32Range(1, 3).Draw(t, label+"MaxUnavailable"))
	}
	return s
}

// Whatever the class defaults say (rendered by `render --cluster` from the admin's sizing then or
// now) and whatever sizing a Profile is granted under the controller's configuration, the budget
// istiod merges from the class defaults and the namespace's parametersRef ConfigMap never has both
// minAvailable and maxUnavailable, which the API server refuses ("minAvailable and maxUnavailable
// cannot be both set"), so istiod would give the waypoint up; and where the namespace's ConfigMap
// has a budget, the merged one is that budget.
func TestMergedBudgetNeverHasBothBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		class, err := waypoint.ClassDefaults(parseConfig(t, "mesh: {waypoint: {"+sizingYAML(t, "class")+"}}\n"))
		if err != nil {
			t.Fatal(err)
		}
		cfg := parseConfig(t, "mesh: {waypoint: {"+sizingYAML(t, "controller")+
			", sizingOverrides: [{namespaceSelector: {matchLabels: {tier: large}}, maximum: {replicas: 6, resources: {memory: 2Gi}}}]}}\n")
		asked := fmt.Sprintf("{resources: {limits: {memory: %dMi}}}", rapid.SampledFrom([]int{1024, 1536, 2048}).Draw(t, "memory"))
		if a := cfg.Mesh.Waypoint.Autoscaling; a != nil {
			asked = fmt.Sprintf("{autoscaling: {minReplicas: %d, maxReplicas: 6}}", rapid.Int32Range(a.MinReplicas, 6).Draw(t, "minReplicas"))
		} else if rapid.Bool().Draw(t, "moreReplicas") {
			asked = fmt.Sprintf("{replicas: %d}", rapid.Int32Range(*cfg.Mesh.Waypoint.Replicas, 6).Draw(t, "replicas"))
		}
		d, err := waypoint.New(cfg).Generate(plugin.Target{Namespace: ns, Profile: waypointProfile(t, asked), Observed: plugin.Observed{Labels: map[string]string{"tier": "large"}}})
		if err != nil || len(d.Errors) > 0 {
			t.Fatalf("asked %s: %v %v", asked, err, d.Errors)
		}
		params, _ := desiredPatch(d)
		var nsData map[string]string
		if params != nil {
			nsData = params.Data
		}
		spec, rendered, err := istiodPDB(class.Data, nsData)
		if err != nil {
			t.Fatalf("istiod fails the render: %v", err)
		}
		_, hasMin := spec["minAvailable"]
		_, hasMax := spec["maxUnavailable"]
		if hasMin && hasMax {
			t.Fatalf("merged budget %v has both bounds: class defaults %q, namespace %q", spec, class.Data["podDisruptionBudget"], nsData["podDisruptionBudget"])
		}
		own, ok := nsData["podDisruptionBudget"]
		if !ok {
			return
		}
		ownSpec, _, err := istiodPDB(map[string]string{"podDisruptionBudget": own})
		if err != nil {
			t.Fatal(err)
		}
		if !rendered || fmt.Sprint(spec) != fmt.Sprint(ownSpec) {
			t.Fatalf("merged budget %v, want the namespace's own %v", spec, ownSpec)
		}
	})
}

// parseConfig is fixture.Config for a rapid check.
func parseConfig(t *rapid.T, body string) *config.Config {
	c, err := config.Parse([]byte("apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\n" + body))
	if err != nil {
		t.Fatalf("config %q: %v", body, err)
	}
	return c
}

// waypointProfile is a Profile with a Waypoint entry asking for asked (YAML).
func waypointProfile(t *rapid.T, asked string) *profilev1.Profile {
	js, err := yaml.YAMLToJSON([]byte(asked))
	if err != nil {
		t.Fatal(err)
	}
	return &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: profilev1.ProfileSpec{Plugins: []profilev1.Plugin{{TypeMeta: metav1.TypeMeta{Kind: waypoint.ProfileKind}, Spec: &runtime.RawExtension{Raw: js}}}}}
}
