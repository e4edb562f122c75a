package authz_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

const activator = "cluster.local/ns/knative-serving/sa/activator"

// A caller on behalf of users joins the ingress gateway in the header rule of the owner's and every
// contributor's policy, and gets no rule of its own: it is never admitted without the header.
func TestCallerOnBehalfOfUserJoinsTheHeaderRule(t *testing.T) {
	cfg := fixture.Config(t, platformCallersSidecar)
	want := []string{cfg.Authorization.Principals.IngressGateway, "cluster.local/ns/kubeflow/sa/ml-pipeline-ui", activator}

	owner, err := authz.OwnerPolicy(cfg, ns, "alice@example.com")
	require.NoError(t, err)
	contributor, err := authz.ContributorPolicy(cfg, ns, "bob@example.com", "edit")
	require.NoError(t, err)
	for _, pol := range []*istiosecurityv1.AuthorizationPolicy{owner, contributor} {
		assert.Equal(t, want, pol.Spec.Rules[0].From[0].Source.Principals, pol.Name)
		require.Len(t, pol.Spec.Rules[0].When, 1, pol.Name)
		for i, r := range pol.Spec.Rules[1:] {
			for _, f := range r.From {
				assert.NotContains(t, f.Source.Principals, activator, "%s rules[%d] admits the activator without the header", pol.Name, i+1)
			}
		}
	}
}

// A sidecar caller keeps its L7 rule at the waypoint (for the day it runs ambient) and gets an L4
// rule for its principal and ports in the ztunnel policy, with a warning that names what it may
// now reach; a sidecar caller without methods or paths loses nothing and is not warned about.
func TestSidecarCallerGetsAnL4RuleAndAWarning(t *testing.T) {
	cfg := fixture.Config(t, platformCallersSidecar)
	d, err := authz.New(cfg).Generate(plugin.Target{Namespace: ns, Owner: owner})
	require.NoError(t, err)
	zt := findPolicy(t, d, cfg.Authorization.ZtunnelPolicyName)
	require.Len(t, zt.Spec.Rules, 4, "waypoint, namespace, culler, Katib")
	culler, katib := zt.Spec.Rules[2], zt.Spec.Rules[3]
	assert.Equal(t, []string{"cluster.local/ns/kubeflow/sa/notebook-controller-service-account"}, culler.From[0].Source.Principals)
	assert.Empty(t, culler.To, "the culler set no ports: every port")
	assert.Equal(t, []string{"cluster.local/ns/kubeflow/sa/katib-controller"}, katib.From[0].Source.Principals)
	assert.Equal(t, []string{"6789"}, katib.To[0].Operation.Ports)

	ownerPol := findPolicy(t, d, cfg.Authorization.OwnerPolicyName)
	assert.Contains(t, ownerPol.Spec.Rules, &securityv1beta1.Rule{
		From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{Principals: []string{"cluster.local/ns/kubeflow/sa/notebook-controller-service-account"}}}},
		To:   []*securityv1beta1.Rule_To{{Operation: &securityv1beta1.Operation{Methods: []string{"GET"}, Paths: []string{"*/api/kernels"}}}},
	})

	require.Len(t, d.Warnings, 1, "only the culler loses limits: %q", d.Warnings)
	assert.Contains(t, d.Warnings[0], `platform caller "notebook-controller"`)
	assert.Contains(t, d.Warnings[0], "every port and path of every pod in the namespace, not just GET */api/kernels")

	cfg.Authorization.PlatformCallers[2].Ports = []int32{8888}
	d, err = authz.New(cfg).Generate(plugin.Target{Namespace: ns, Owner: owner})
	require.NoError(t, err)
	require.Len(t, d.Warnings, 1)
	assert.Contains(t, d.Warnings[0], "every path on port 8888 of every pod in the namespace, not just GET */api/kernels")
}

// In sidecar mode every caller's rule runs in the owner policy on the pods, as today: no ztunnel
// policy and nothing lost, so no warning.
func TestSidecarCallerInSidecarModeRendersAsToday(t *testing.T) {
	cfg := fixture.Config(t, "mesh: {mode: sidecar}\n"+platformCallersSidecar)
	d, err := authz.New(cfg).Generate(plugin.Target{Namespace: ns, Owner: owner})
	require.NoError(t, err)
	assert.Empty(t, d.Warnings)
	for _, o := range d.Objects {
		assert.NotEqual(t, cfg.Authorization.ZtunnelPolicyName, o.GetName())
	}
}

func TestIPBlockExceptionIsASourceIPRule(t *testing.T) {
	cfg := fixture.Config(t, "authorization: {l4Exceptions: [{ipBlocks: [10.8.0.0/24, 'fd00::1'], ports: [9091]}]}\n")
	pol := authz.ZtunnelPolicy(cfg, ns)
	require.Len(t, pol.Spec.Rules, 3)
	r := pol.Spec.Rules[2]
	assert.Equal(t, &securityv1beta1.Source{IpBlocks: []string{"10.8.0.0/24", "fd00::1"}}, r.From[0].Source, "ipBlocks, which ztunnel enforces; never remoteIpBlocks")
	assert.Equal(t, []string{"9091"}, r.To[0].Operation.Ports)
	assert.Empty(t, authz.L7Attributes(&pol.Spec))
}

func findPolicy(t *testing.T, d plugin.Desired, name string) *istiosecurityv1.AuthorizationPolicy {
	t.Helper()
	for _, o := range d.Objects {
		if pol, ok := o.(*istiosecurityv1.AuthorizationPolicy); ok && pol.Name == name {
			return pol
		}
	}
	var names []string
	for _, o := range d.Objects {
		names = append(names, o.GetName())
	}
	t.Fatalf("no policy %s among %s", name, strings.Join(names, ", "))
	return nil
}
