package platform_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// The guard missing, unbound, bound to fewer namespaces, or recognising them otherwise, and the
// waypoints' default deny missing or changed, are each one finding, naming the policy.
func TestCheckReportsTheGuardAndTheDefaultDeny(t *testing.T) {
	t.Parallel()
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
		"a policy that fails open": {func(c client.Client) {
			p := policy(c, guard.PodsPolicy)
			p.Spec.FailurePolicy = ptr.To(admissionv1.Ignore)
			require.NoError(t, c.Update(ctx, p))
		}, map[platform.FindingKind][]string{platform.FindingGuardStale: {guard.PodsPolicy}}},
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

// A guard rendered from another PluginConfig is reported, policy by policy, on the API server
// (which defaults what it keeps): deploy/guard, the default ambient rendering, under a sidecar
// configuration lacks every sidecar check, and under a fork's refuses the fork's controller
// (review admin5, A5-3). The guard of the running configuration is not.
//
// Not in parallel: the guard refuses what the other tests on its server write (they stand for a
// cluster before the guard), so it is removed, and in force no more, before they start.
func TestCheckReportsAGuardRenderedFromAnotherConfiguration(t *testing.T) {
	env := envtest.StartNamed(t, ownNamespaces)
	c, ctx := env.Client, context.Background()
	fixture.InstallGuard(t, c, config.Default())
	objs, err := guard.Objects(config.Default())
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, o := range objs {
			require.NoError(t, c.Delete(ctx, o), "removing %s", o.GetName())
		}
		fixture.GuardInForce(t, c) // a barrier: the policies written before it are the ones in force
	})
	stale := func(cfg *config.Config) map[string]platform.Finding {
		t.Helper()
		require.NoError(t, cfg.Validate())
		report, err := platform.Check(ctx, c, cfg)
		require.NoError(t, err)
		out := map[string]platform.Finding{}
		for _, f := range report.Findings {
			if f.Kind == platform.FindingGuardStale {
				out[f.Policy] = f
			}
		}
		return out
	}
	assert.Empty(t, stale(config.Default()), "the guard of the running configuration, as the API server keeps it")

	sidecar := config.Default()
	sidecar.Mesh.Mode = config.ModeSidecar
	got := stale(sidecar)
	require.Contains(t, got, guard.PodsPolicy, "the pods policy lacks the sidecar checks")
	assert.Contains(t, got[guard.PodsPolicy].Problem, "spec.validations")
	assert.Contains(t, got[guard.PodsPolicy].Fix, "render -cluster")
	assert.Equal(t, platform.WhatGuard, got[guard.PodsPolicy].What)

	fork := fixture.Config(t, `
mesh: {mode: ambient}
authorization: {adoptOwnerPolicy: true, contributors: plugin}
guard: {controllerServiceAccount: kubeflow/profiles-controller-service-account}
`)
	assert.Contains(t, stale(fork), guard.NamespaceLabelsPolicy, "the policy that refuses the fork's enrolment")

	// A policy narrowed by hand in its own matchConstraints judges nothing any more (the
	// careless-admin re-review of Dec 5).
	for name, narrow := range map[string]func(*admissionv1.MatchResources){
		guard.PodsPolicy: func(m *admissionv1.MatchResources) {
			m.ExcludeResourceRules = []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
				Operations: []admissionv1.OperationType{admissionv1.OperationAll},
				Rule:       admissionv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}}}}}
		},
		guard.WorkloadsPolicy: func(m *admissionv1.MatchResources) {
			m.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"guarded": "yes"}}
		},
		guard.ManagedObjectsPolicy: func(m *admissionv1.MatchResources) {
			m.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"guarded": "yes"}}
		},
	} {
		p := &admissionv1.ValidatingAdmissionPolicy{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: name}, p))
		narrow(p.Spec.MatchConstraints)
		require.NoError(t, c.Update(ctx, p))
	}
	got = stale(config.Default())
	for _, name := range []string{guard.PodsPolicy, guard.WorkloadsPolicy, guard.ManagedObjectsPolicy} {
		require.Contains(t, got, name, "a policy narrowed in its matchConstraints")
		assert.Contains(t, got[name].Problem, "spec.matchConstraints", name)
	}
}
