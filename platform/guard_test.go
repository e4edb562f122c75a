package platform_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// The guard missing, unbound, bound to fewer namespaces, or recognising them otherwise, and the
// waypoints' default deny missing or changed, are each one finding, naming the policy.
func TestCheckReportsTheGuardAndTheDefaultDeny(t *testing.T) {
	cfg := config.Default()
	ctx := context.Background()
	kinds := func(c client.Client) map[platform.FindingKind][]string {
		t.Helper()
		report, err := platform.Check(ctx, c, cfg)
		require.NoError(t, err)
		out := map[platform.FindingKind][]string{}
		for _, f := range report.Findings {
			out[f.Kind] = append(out[f.Kind], f.Policy)
		}
		return out
	}
	policy := func(c client.Client, name string) *admissionv1.ValidatingAdmissionPolicy {
		p := &admissionv1.ValidatingAdmissionPolicy{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: name}, p))
		return p
	}
	binding := func(c client.Client, name string) *admissionv1.ValidatingAdmissionPolicyBinding {
		b := &admissionv1.ValidatingAdmissionPolicyBinding{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: name}, b))
		return b
	}
	for name, tc := range map[string]struct {
		change func(client.Client)
		want   map[platform.FindingKind][]string
	}{
		"a policy missing": {func(c client.Client) {
			require.NoError(t, c.Delete(ctx, policy(c, guard.PodsPolicy)))
		}, map[platform.FindingKind][]string{platform.FindingGuardMissing: {guard.PodsPolicy}}},
		"a binding missing": {func(c client.Client) {
			require.NoError(t, c.Delete(ctx, binding(c, guard.NamespaceLabelsPolicy)))
		}, map[platform.FindingKind][]string{platform.FindingGuardUnbound: {guard.NamespaceLabelsPolicy}}},
		"a binding that only audits": {func(c client.Client) {
			b := binding(c, guard.ManagedObjectsPolicy)
			b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Audit}
			require.NoError(t, c.Update(ctx, b))
		}, map[platform.FindingKind][]string{platform.FindingGuardUnbound: {guard.ManagedObjectsPolicy}}},
		"a binding that selects namespaces": {func(c client.Client) {
			b := binding(c, guard.ServicesPolicy)
			b.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}
			require.NoError(t, c.Update(ctx, b))
		}, map[platform.FindingKind][]string{platform.FindingGuardMisbound: {guard.ServicesPolicy}}},
		"a policy that recognises namespaces otherwise": {func(c client.Client) {
			p := policy(c, guard.WorkloadsPolicy)
			p.Spec.Variables[0].Expression = "namespaceObject != null && namespaceObject.metadata.name.startsWith('team-')"
			require.NoError(t, c.Update(ctx, p))
		}, map[platform.FindingKind][]string{platform.FindingGuardMisbound: {guard.WorkloadsPolicy}}},
		"the default deny missing": {func(c client.Client) {
			deny, err := waypoint.ClusterDefaultDeny(cfg)
			require.NoError(t, err)
			require.NoError(t, c.Delete(ctx, deny))
		}, map[platform.FindingKind][]string{platform.FindingWaypointDefaultDenyMissing: {"waypoint-default-deny"}}},
		"the default deny changed": {func(c client.Client) {
			deny, err := waypoint.ClusterDefaultDeny(cfg)
			require.NoError(t, err)
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(deny), deny))
			deny.Spec.TargetRefs = nil
			require.NoError(t, c.Update(ctx, deny))
		}, map[platform.FindingKind][]string{platform.FindingWaypointDefaultDenyMissing: {"waypoint-default-deny"}}},
	} {
		t.Run(name, func(t *testing.T) {
			c := healthyPlatform(t, cfg, ingressPod(t, cfg, "10.42.7.15"))
			require.Empty(t, kinds(c))
			tc.change(c)
			assert.Equal(t, tc.want, kinds(c))
		})
	}
}
