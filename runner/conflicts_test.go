package runner_test

// Objects and labels of other writers under the names the plugins want: a conflict is left alone
// and withholds only the labels that require the object, and what voids a protection without
// being the plugin's to change is reported.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// A legacy owner policy of another writer under the plugin's name (adoptOwnerPolicy false) is a
// conflict: the waypoint would have no owner policy, so nothing is routed to it.
func TestLegacyOwnerPolicyBlocksUseWaypoint(t *testing.T) {
	legacy := &istiosecurityv1.AuthorizationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ownerName, Namespace: ns, Annotations: map[string]string{"user": "alice@example.com", "role": "admin"}},
		Spec:       securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{}}},
	}
	m := newMesh(t, legacy)
	require.Error(t, m.apply().Err())
	res := m.apply()
	var conflict *runner.ConflictError
	require.ErrorAs(t, res.Err(), &conflict)
	labels := m.labels()
	assert.Equal(t, "ambient", labels[dataplaneMode], "the ztunnel policy protects, so the namespace is enrolled")
	assert.NotContains(t, labels, useWaypoint)
	assert.NotContains(t, labels, ingressUseWaypoint)
	assert.Error(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, &gatewayv1.Gateway{}), "no waypoint to route through")
	assert.Contains(t, res.Waiting(), "waypoint: waiting for waypoint: Gateway "+ns+"/waypoint is not made until AuthorizationPolicy "+ownerName+
		", which another writer made, is replaced by the plugin's, so that it never serves without its owner policy")
}

// The same conflict arising later (someone replaces the plugin's owner policy) withdraws routing.
func TestReplacedOwnerPolicyWithdrawsUseWaypoint(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ownerName)))
	require.NoError(t, m.c.Create(context.Background(), &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ownerName, Namespace: ns}}))
	require.Error(t, m.apply().Err())
	assert.NotContains(t, m.labels(), useWaypoint)
	assert.Equal(t, "ambient", m.labels()[dataplaneMode])
}

// A conflict on an object that no enrolment label requires takes nothing down: here a
// contributor's policy, whose name another of this library's plugins holds. (The waypoint's
// seccomp ConfigMap is no such object: the routing labels require it.)
func TestUnrelatedConflictKeepsEnrolment(t *testing.T) {
	m := newMesh(t)
	m.cfg.Authorization.Contributors = config.ContributorsByPlugin
	m.enrol()
	bob := authz.ContributorPolicyName("bob@example.com", authz.RoleEdit)
	require.NoError(t, m.c.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: bob, Namespace: ns, Annotations: map[string]string{authz.UserAnnotation: "bob@example.com", authz.RoleAnnotation: authz.RoleEdit}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kubeflow-edit"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "bob@example.com"}},
	}))
	require.NoError(t, m.c.Create(context.Background(), &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: bob, Namespace: ns,
		Labels: map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: waypoint.PluginName}}}))
	res := m.apply()
	var conflict *runner.ConflictError
	require.ErrorAs(t, res.Err(), &conflict)
	enrolled(t, m.labels())
}

// A foreign object holding the ztunnel policy's name: while pods run in ambient the namespace
// stays there (leaving would take them out of every data plane) and the runner says why; with no
// pod, it is withdrawn and the label waits.
func TestConflictOnTheZtunnelName(t *testing.T) {
	for _, withPod := range []bool{true, false} {
		t.Run(map[bool]string{true: "pod running", false: "no pod"}[withPod], func(t *testing.T) {
			m := newMesh(t)
			m.enrol()
			if withPod {
				m.addPod("app", nil)
			}
			require.NoError(t, m.c.Delete(context.Background(), m.policy(ztunnelName)))
			require.NoError(t, m.c.Create(context.Background(), &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ztunnelName, Namespace: ns}}))
			res := m.apply()
			var conflict *runner.ConflictError
			require.ErrorAs(t, res.Err(), &conflict)
			labels := m.labels()
			assert.NotContains(t, labels, useWaypoint, "the waypoint requires the ztunnel policy")
			if withPod {
				assert.Equal(t, "ambient", labels[dataplaneMode])
				assert.Contains(t, strings.Join(res.Warnings(), "\n"),
					"label istio.io/dataplane-mode=ambient stays although AuthorizationPolicy.security.istio.io/"+ztunnelName+" exists and was made by another writer: 1 running pod(s) would otherwise be outside every data plane: app")
			} else {
				assert.NotContains(t, labels, dataplaneMode)
				assert.Contains(t, res.Waiting(), "waypoint: label istio.io/dataplane-mode withheld: AuthorizationPolicy.security.istio.io/"+ztunnelName+" exists and was made by another writer")
			}
		})
	}
}

// A namespace that another writer put in ambient while the ztunnel policy cannot exist is
// reported, not passed over in silence.
func TestForeignAmbientLabelWithoutZtunnelPolicyIsReported(t *testing.T) {
	foreign := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ztunnelName, Namespace: ns}}
	m := newMesh(t, foreign)
	m.editNamespace("kubectl-label", func(n *corev1.Namespace) { n.Labels = map[string]string{dataplaneMode: "ambient"} })
	res := m.apply()
	assert.Contains(t, strings.Join(res.Warnings(), "\n"),
		"namespace label istio.io/dataplane-mode=ambient was set by kubectl-label although AuthorizationPolicy.security.istio.io/"+ztunnelName+" exists and was made by another writer")
}

// FINDING (fail-open, namespace editor; kubeflow-edit may create ConfigMaps). The waypoint
// Gateway names its Pod Security patch by spec.infrastructure.parametersRef, a ConfigMap
// <waypoint>-seccomp in the user namespace, and istiod applies that ConfigMap's "deployment" key
// as a strategic merge patch to the waypoint Deployment (image, containers, args, env). An editor
// who created that ConfigMap first got a ConflictError reported, but the namespace was still
// routed (use-waypoint, ingress-use-waypoint) through a waypoint whose pod the editor wrote. Then
// both routing labels required the plugin's own, intact ConfigMap. Now the patch is an opt-in, and
// with it on the Gateway never references a ConfigMap another writer made, so istiod does not
// build the waypoint from it at all.
func TestForeignSeccompConfigMapKeepsTheNamespaceOffTheWaypoint(t *testing.T) {
	hijack := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "waypoint-seccomp", Namespace: ns},
		Data:       map[string]string{"deployment": "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        image: evil/proxy\n"},
	}
	m := newMesh(t, hijack).withPatch()
	res := m.apply()
	var conflict *runner.ConflictError
	require.ErrorAs(t, res.Err(), &conflict)
	m.program()
	res = m.apply()
	require.ErrorAs(t, res.Err(), &conflict, "the conflict is still reported")
	gw := &gatewayv1.Gateway{}
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
	assert.Nil(t, gw.Spec.Infrastructure, "the Gateway names the editor's ConfigMap, so istiod patches the waypoint with it")
	labels := m.labels()
	assert.Empty(t, labels[useWaypoint],
		"the namespace is routed although the ConfigMap the opt-in needs is not the plugin's (labels %v, errors %v)", labels, res.Err())
	assert.Empty(t, labels[ingressUseWaypoint])
	assert.Equal(t, "ambient", labels[dataplaneMode], "the ztunnel policy still protects the pods, so they stay in ambient")
	assert.Equal(t, hijack.Data, m.configMap("waypoint-seccomp").Data, "another writer's object is not the plugin's to change")
}

// FINDING (fail-open, not detected; anyone who may write AuthorizationPolicies in the namespace:
// an admin's kubectl apply, a GitOps tool, another Kubeflow component; Kubeflow's default
// kubeflow-edit and kubeflow-admin roles only read them). ALLOW policies are OR'ed. One more
// selector-less ALLOW policy whose rules ztunnel can enforce (here rules: [{}], "allow all") makes
// the ztunnel policy restrict nothing, and one more ALLOW policy attached to the waypoint makes the
// owner policy restrict nothing. The authz plugin now reports each such policy by name, as a
// warning (the policy is not the plugin's to change); docs/security/threat-model.md ("What it does
// not protect against") says the guarantees hold only while no one else may write
// AuthorizationPolicies in user namespaces.
func TestForeignAllowAllPoliciesAreReported(t *testing.T) {
	l4 := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-all", Namespace: ns}}
	l4.Spec.Rules = []*securityv1beta1.Rule{{}}
	l7 := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-all-at-waypoint", Namespace: ns}}
	l7.Spec.Rules = []*securityv1beta1.Rule{{}}
	l7.Spec.TargetRefs = []*typev1beta1.PolicyTargetReference{{Group: "gateway.networking.k8s.io", Kind: "Gateway", Name: "waypoint"}}
	m := newMesh(t, l4, l7)
	require.NoError(t, m.apply().Err())
	m.program()
	res := m.apply()
	require.NoError(t, res.Err())
	all := strings.Join(res.Warnings(), "\n")
	assert.Contains(t, all, "AuthorizationPolicy allow-all (not made by this plugin) admits every caller at ztunnel",
		"a foreign policy that voids the ztunnel policy is not reported")
	assert.Contains(t, all, "AuthorizationPolicy allow-all-at-waypoint (not made by this plugin) admits every caller at the waypoint",
		"a foreign policy that voids the owner policy at the waypoint is not reported")
}
