package authz_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// Finding R4-4 (low: the platform's own callers, admin-configured). In sidecar mode a held or
// standing istio.io/dataplane-mode=ambient (runner holdStanding: any other writer co-owning it)
// makes the plugin emit the ztunnel policy (authz/plugin.go Generate), which has no selector and
// no targetRefs, so every sidecar of the namespace enforces it too. Its rule for a sidecar
// caller admits that caller's principal on its ports with none of its methods and paths: an
// ALLOW next to the owner policy's L7 rule for it, so the caller reaches every path. In ambient
// mode the plugin warns of exactly that (sidecarCallerLosses); in sidecar mode, where the loss
// now lasts as long as the other writer's label, it did not; now it does.
func TestAZtunnelPolicyHeldInSidecarModeSaysWhatSidecarCallersGainOnTheSidecars(t *testing.T) {
	cfg := fixture.Config(t, "mesh: {mode: sidecar}\n"+platformCallersSidecar)
	d, err := authz.New(cfg).Generate(plugin.Target{Namespace: ns, Owner: owner,
		Observed: plugin.Observed{Held: map[string]string{"istio.io/dataplane-mode": "ambient"}}})
	require.NoError(t, err)
	var ztunnel *istiosecurityv1.AuthorizationPolicy
	for _, o := range d.Objects {
		if p, ok := o.(*istiosecurityv1.AuthorizationPolicy); ok && p.Name == cfg.Authorization.ZtunnelPolicyName {
			ztunnel = p
		}
	}
	require.NotNil(t, ztunnel, "the held label keeps the ztunnel policy")
	require.Nil(t, ztunnel.Spec.GetSelector(), "it applies to every workload of the namespace, sidecars too")
	require.Empty(t, ztunnel.Spec.GetTargetRefs())
	found := false
	for _, r := range ztunnel.Spec.GetRules() {
		for _, f := range r.GetFrom() {
			if strings.Contains(strings.Join(f.GetSource().GetPrincipals(), ","), "notebook-controller") {
				found = len(r.GetTo()) == 0 || len(r.GetTo()[0].GetOperation().GetPaths()) == 0
			}
		}
	}
	require.True(t, found, "the notebook controller's rule has no path limit")
	assert.True(t, strings.Contains(strings.Join(d.Warnings, "\n"), "notebook-controller"),
		"the sidecars now admit notebook-controller on every path and nothing says so: %v", d.Warnings)
}
