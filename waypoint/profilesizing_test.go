package waypoint_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// sizingConfig lets namespaces labelled tier=large ask for up to 2 CPU, 2Gi and 3 replicas.
const sizingConfig = `mesh: {waypoint: {sizingOverrides: [{namespaceSelector: {matchLabels: {tier: large}}, maximum: {replicas: 3, resources: {cpu: "2", memory: 2Gi}}}]}}
`

func generateFor(t *testing.T, cfg *config.Config, labels map[string]string, asked string) plugin.Desired {
	t.Helper()
	p := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if asked != "" {
		js, err := yaml.YAMLToJSON([]byte(asked))
		require.NoError(t, err)
		p.Spec.Plugins = []profilev1.Plugin{{TypeMeta: metav1.TypeMeta{Kind: "PodSecurity"}}, {TypeMeta: metav1.TypeMeta{Kind: waypoint.ProfileKind}, Spec: &runtime.RawExtension{Raw: js}}}
	}
	d, err := waypoint.New(cfg).Generate(plugin.Target{Namespace: ns, Profile: p, Observed: plugin.Observed{Labels: labels, Objects: nil}})
	require.NoError(t, err)
	return d
}

// A Profile in a namespace the admin labelled for it gets the larger waypoint it asks for, through
// the Gateway's parametersRef ConfigMap, which istiod applies after the class defaults: the whole
// effective sizing, with the seccomp profile, a budget and a spread from two replicas on.
func TestProfileGetsTheLargerWaypointItIsAllowed(t *testing.T) {
	cfg := fixture.Config(t, sizingConfig)
	d := generateFor(t, cfg, map[string]string{"tier": "large"}, `{replicas: 3, resources: {requests: {memory: 512Mi}, limits: {memory: 2Gi}}}`)
	require.Empty(t, d.Errors)
	cm, at := desiredPatch(d)
	require.NotNil(t, cm, "no parametersRef ConfigMap")
	gwAt := -1
	for i, o := range d.Objects {
		if o.GetObjectKind().GroupVersionKind().Kind == "Gateway" {
			gwAt = i
		}
	}
	assert.Less(t, at, gwAt, "the ConfigMap is written before the Gateway that references it")
	assert.Equal(t, patchName, refName(desiredGateway(t, d)))
	var dep appsv1.Deployment
	require.NoError(t, yaml.UnmarshalStrict([]byte(cm.Data["deployment"]), &dep))
	assert.Equal(t, int32(3), *dep.Spec.Replicas)
	proxy := dep.Spec.Template.Spec.Containers[0]
	assert.Equal(t, resource.MustParse("512Mi"), proxy.Resources.Requests[corev1.ResourceMemory])
	assert.Equal(t, resource.MustParse("100m"), proxy.Resources.Requests[corev1.ResourceCPU], "what it did not ask for stays the admin's")
	assert.Equal(t, resource.MustParse("2Gi"), proxy.Resources.Limits[corev1.ResourceMemory])
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, dep.Spec.Template.Spec.SecurityContext.SeccompProfile.Type)
	assert.Len(t, dep.Spec.Template.Spec.TopologySpreadConstraints, 1)
	assert.Contains(t, cm.Data["podDisruptionBudget"], "maxUnavailable: 1")
	assert.Contains(t, strings.Join(d.Warnings, "\n"), "namespace editors can write")
}

// Everything else is refused, naming the Profile's field, and the namespace keeps the admin's
// sizing (no ConfigMap, no parametersRef): less than the admin's, more than the maximum, a
// resource the maximum does not name, a request above its limit, autoscaling where the admin has
// none, and any request from a namespace no override matches.
func TestProfileSizingOutsideTheAdminsBoundsIsRefused(t *testing.T) {
	cfg := fixture.Config(t, sizingConfig)
	large := map[string]string{"tier": "large"}
	for name, c := range map[string]struct {
		labels      map[string]string
		asked, want string
	}{
		"fewer replicas":       {large, `{replicas: 0}`, "spec.plugins[1].spec.replicas: 0 refused: below the admin's 1"},
		"too many replicas":    {large, `{replicas: 4}`, "spec.plugins[1].spec.replicas: 4 refused: above the maximum 3"},
		"less memory":          {large, `{resources: {requests: {memory: 64Mi}}}`, "spec.plugins[1].spec.resources.requests[memory]: 64Mi refused: below the admin's 128Mi"},
		"too much cpu":         {large, `{resources: {limits: {cpu: "4"}}}`, "spec.plugins[1].spec.resources.limits[cpu]: 4 refused: above the maximum 2"},
		"unnamed resource":     {large, `{resources: {limits: {ephemeral-storage: 1Gi}}}`, "maximum.resources names no ephemeral-storage"},
		"request above limit":  {large, `{resources: {requests: {memory: 2Gi}}}`, "spec.plugins[1].spec.resources.requests.memory"},
		"autoscaling":          {large, `{autoscaling: {maxReplicas: 3}}`, "do not autoscale"},
		"unknown field":        {large, `{replica: 2}`, `spec.plugins[1].spec: unknown field "replica"`},
		"unlabelled namespace": {map[string]string{"tier": "small"}, `{replicas: 2}`, "no mesh.waypoint.sizingOverrides entry matches the labels of namespace"},
	} {
		t.Run(name, func(t *testing.T) {
			d := generateFor(t, cfg, c.labels, c.asked)
			require.NotEmpty(t, d.Errors)
			msgs := ""
			for _, e := range d.Errors {
				msgs += e.Error() + "\n"
			}
			assert.Contains(t, msgs, c.want)
			assert.Contains(t, msgs, "the admin's waypoint sizing applies")
			cm, _ := desiredPatch(d)
			assert.Nil(t, cm, "a refused request writes no ConfigMap")
			assert.Empty(t, refName(desiredGateway(t, d)))
		})
	}
}

// Asking for exactly the admin's sizing, or for nothing, changes nothing: no ConfigMap in the
// namespace for editors to write.
func TestProfileAskingForTheAdminsSizingGetsNoConfigMap(t *testing.T) {
	cfg := fixture.Config(t, sizingConfig)
	for _, asked := range []string{"", `{}`, `{replicas: 1, resources: {requests: {cpu: 100m}}}`} {
		d := generateFor(t, cfg, map[string]string{"tier": "large"}, asked)
		assert.Empty(t, d.Errors, asked)
		cm, _ := desiredPatch(d)
		assert.Nil(t, cm, asked)
		assert.Empty(t, refName(desiredGateway(t, d)), asked)
	}
}

// With autoscaling, a Profile raises its bounds; min above max is refused.
func TestProfileRaisesTheAutoscalerBounds(t *testing.T) {
	cfg := fixture.Config(t, `mesh: {waypoint: {autoscaling: {minReplicas: 1, maxReplicas: 2}, sizingOverrides: [{namespaceSelector: {matchLabels: {tier: large}}, maximum: {replicas: 5}}]}}
`)
	large := map[string]string{"tier": "large"}
	d := generateFor(t, cfg, large, `{autoscaling: {minReplicas: 2, maxReplicas: 5}}`)
	require.Empty(t, d.Errors)
	cm, _ := desiredPatch(d)
	require.NotNil(t, cm)
	assert.Contains(t, cm.Data["horizontalPodAutoscaler"], "minReplicas: 2")
	assert.Contains(t, cm.Data["horizontalPodAutoscaler"], "maxReplicas: 5")
	assert.NotContains(t, cm.Data["deployment"], "replicas", "the autoscaler owns the count")
	assert.Contains(t, cm.Data["podDisruptionBudget"], "maxUnavailable: 1", "two pods at least get a budget")

	d = generateFor(t, cfg, large, `{autoscaling: {minReplicas: 3}}`)
	require.NotEmpty(t, d.Errors)
	assert.Contains(t, d.Errors[0].Error(), "spec.plugins[1].spec.autoscaling.maxReplicas: 2 refused: below minReplicas 3")
	d = generateFor(t, cfg, large, `{replicas: 3}`)
	require.NotEmpty(t, d.Errors)
	assert.Contains(t, d.Errors[0].Error(), "ask for autoscaling.minReplicas instead")
}
