package waypoint_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// evaluate runs Pod Security's own checks on the Deployment's pod template.
func evaluate(t *testing.T, d *appsv1.Deployment, level psaapi.Level) policy.AggregateCheckResult {
	t.Helper()
	var eval policy.Evaluator
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	lv := psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}
	return policy.AggregateCheckResults(eval.EvaluatePod(lv, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec))
}

// patchLikeIstiod applies the ConfigMap's "deployment" key to the Deployment as a strategic merge
// patch, which is what istiod's gateway deployment controller does with parametersRef overlays.
func patchLikeIstiod(t *testing.T, d *appsv1.Deployment, overlay string) *appsv1.Deployment {
	t.Helper()
	orig, err := yaml.Marshal(d)
	require.NoError(t, err)
	origJSON, err := yaml.YAMLToJSON(orig)
	require.NoError(t, err)
	patchJSON, err := yaml.YAMLToJSON([]byte(overlay))
	require.NoError(t, err)
	merged, err := strategicpatch.StrategicMergePatch(origJSON, patchJSON, appsv1.Deployment{})
	require.NoError(t, err)
	out := &appsv1.Deployment{}
	require.NoError(t, yaml.Unmarshal(merged, out))
	return out
}

// Both places the seccomp patch can come from, the class defaults in istiod's namespace (the
// default) and the opt-in per-namespace parametersRef ConfigMap, make Istio's default waypoint pod
// admissible under restricted, and SetsSeccompDefault recognises both.
func TestSeccompPatchMakesTheWaypointPodAdmissibleUnderRestricted(t *testing.T) {
	data, err := os.ReadFile("../testdata/waypoint/istio-waypoint-deployment.yaml")
	require.NoError(t, err)
	istioDefault := &appsv1.Deployment{}
	require.NoError(t, yaml.UnmarshalStrict(data, istioDefault))

	before := evaluate(t, istioDefault, psaapi.LevelRestricted)
	require.False(t, before.Allowed, "Istio's default waypoint pod must fail restricted, or this test proves nothing")
	assert.Contains(t, before.ForbiddenReason(), "seccompProfile")
	assert.True(t, evaluate(t, istioDefault, psaapi.LevelBaseline).Allowed, "it passes baseline")

	classDefaults, err := waypoint.ClassDefaults(config.Default())
	require.NoError(t, err)
	for name, cm := range map[string]*corev1.ConfigMap{
		"class defaults":         classDefaults,
		"per-namespace (opt-in)": waypoint.SeccompConfigMap(config.Default(), "kubeflow-user-example-com"),
	} {
		t.Run(name, func(t *testing.T) {
			patched := patchLikeIstiod(t, istioDefault, cm.Data["deployment"])
			after := evaluate(t, patched, psaapi.LevelRestricted)
			assert.True(t, after.Allowed, "restricted still refuses: %s: %s", after.ForbiddenReason(), after.ForbiddenDetail())
			assert.Equal(t, "istio-proxy", patched.Spec.Template.Spec.Containers[0].Name, "the patch must not drop the proxy container")
			assert.True(t, waypoint.SetsSeccompDefault(cm))
		})
	}
}

// SetsSeccompDefault agrees with Pod Security on what istiod would make of a patch: it is true
// exactly when the patched default waypoint pod passes restricted.
func TestSetsSeccompDefaultAgreesWithPodSecurity(t *testing.T) {
	data, err := os.ReadFile("../testdata/waypoint/istio-waypoint-deployment.yaml")
	require.NoError(t, err)
	istioDefault := &appsv1.Deployment{}
	require.NoError(t, yaml.UnmarshalStrict(data, istioDefault))
	const pod = "spec:\n  template:\n    spec:\n"
	patches := map[string]string{
		"runtime default":       pod + "      securityContext:\n        seccompProfile:\n          type: RuntimeDefault\n",
		"localhost":             pod + "      securityContext:\n        seccompProfile:\n          type: Localhost\n          localhostProfile: waypoint.json\n",
		"unconfined":            pod + "      securityContext:\n        seccompProfile:\n          type: Unconfined\n",
		"container unconfined":  pod + "      securityContext:\n        seccompProfile:\n          type: RuntimeDefault\n      containers:\n      - name: istio-proxy\n        securityContext:\n          seccompProfile:\n            type: Unconfined\n",
		"other field only":      pod + "      priorityClassName: high\n",
		"service account patch": "metadata:\n  annotations:\n    a: b\n",
	}
	for name, patch := range patches {
		t.Run(name, func(t *testing.T) {
			cm := &corev1.ConfigMap{Data: map[string]string{"deployment": patch}}
			admitted := evaluate(t, patchLikeIstiod(t, istioDefault, patch), psaapi.LevelRestricted).Allowed
			assert.Equal(t, admitted, waypoint.SetsSeccompDefault(cm))
		})
	}
	assert.False(t, waypoint.SetsSeccompDefault(nil))
	assert.False(t, waypoint.SetsSeccompDefault(&corev1.ConfigMap{Data: map[string]string{"service": patches["runtime default"]}}), "only the deployment key patches the pod")
	assert.False(t, waypoint.SetsSeccompDefault(&corev1.ConfigMap{Data: map[string]string{"deployment": "spec: ["}}), "a patch istiod cannot parse sets nothing")
}
