package runner_test

// Scenarios from the security review (branch attack) that the library now withstands: each plays
// an event sequence a tenant or namespace editor can cause and asserts the safe outcome. The
// comment of each keeps the reviewer's finding.

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

const dryRun = "istio.io/dry-run"

// withPatch switches on the opt-in per-namespace seccomp patch (mesh.waypoint.seccompPatch).
func (m *mesh) withPatch() *mesh {
	m.cfg.Mesh.Waypoint.SeccompPatch = ptrTo(true)
	m.configure(config.ModeAmbient)
	return m
}

// FINDING (fail-open, persistent and silent; anyone who may update AuthorizationPolicies, e.g. a
// GitOps tool or an admin "trying dry-run"). Istio reads the annotation istio.io/dry-run: "true"
// on an AuthorizationPolicy as "do not enforce": istiod does not send such a policy to ztunnel at
// all (istio/istio pilot/pkg/serviceregistry/ambient/authorization.go, convertAuthorizationPolicy)
// and proxies turn it into shadow rules only (pilot/pkg/security/authz/builder/builder.go,
// isDryRun). On the ztunnel policy that leaves ambient pods with no ALLOW policy (ztunnel admits
// every caller); on the owner policy it leaves the waypoint without the owner check. The
// intactness model looked only at spec, so the annotated policies counted as intact. Now the
// policies state istio.io/dry-run: "false", and another writer's value is drift: restored in the
// same call and reported with that writer's field manager.
func TestDryRunAnnotationOnThePoliciesIsRestoredAndReported(t *testing.T) {
	for _, name := range []string{ztunnelName, ownerName} {
		t.Run(name, func(t *testing.T) {
			m := newMesh(t)
			m.enrol()
			pol := m.policy(name)
			require.Equal(t, "false", pol.Annotations[dryRun], "the policy states that it is enforced")
			pol.Annotations[dryRun] = "true"
			require.NoError(t, m.c.Update(context.Background(), pol, client.FieldOwner("gitops")))
			res := m.apply()
			require.NoError(t, res.Err())
			assert.Equal(t, "false", m.policy(name).Annotations[dryRun],
				"the policy stays in dry-run, i.e. not enforced, while the namespace stays enrolled (labels %v, writes %v)", m.labels(), m.writes)
			warnings := strings.Join(res.Warnings(), "\n")
			assert.Contains(t, warnings, "AuthorizationPolicy.security.istio.io/"+name+" was changed by another writer (gitops set metadata.annotations.istio.io/dry-run)")
			restoredNotRouted(t, m.labels())

			// Restored means no drift left: the next call routes again, the one after writes nothing.
			require.NoError(t, m.apply().Err())
			enrolled(t, m.labels())
			m.writes = nil
			res = m.apply()
			require.NoError(t, res.Err())
			assert.Empty(t, m.writes)
			assert.Empty(t, res.Warnings())
		})
	}
}

// FINDING (fail-open window + silent drift, namespace editor). The plugin's own seccomp
// ConfigMap was not checked for drift beyond the values it sets: the intact check read only
// spec, and a ConfigMap has data. A key another writer adds (istiod reads "service",
// "serviceAccount", "horizontalPodAutoscaler" and "podDisruptionBudget" next to "deployment",
// each a patch of what it generates for the waypoint) counted as unchanged forever, with no
// warning, while use-waypoint stayed. Now data and binaryData are content like spec: another
// writer's key is restored away in the same call and reported.
func TestAKeyAddedToTheWaypointPatchConfigMapIsRestoredAndReported(t *testing.T) {
	m := newMesh(t).withPatch()
	m.enrol()
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: ns, Name: "waypoint-seccomp"}
	require.NoError(t, m.c.Get(context.Background(), key, cm))
	want := cm.Data
	cm.Data = map[string]string{"deployment": cm.Data["deployment"], "service": "spec:\n  type: LoadBalancer\n"}
	require.NoError(t, m.c.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")))
	res := m.apply()
	require.NoError(t, res.Err())
	require.NoError(t, m.c.Get(context.Background(), key, cm))
	assert.Equal(t, want, cm.Data, "another writer's patch of the waypoint stays in the ConfigMap istiod applies")
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "ConfigMap/waypoint-seccomp was changed by another writer (kubectl-edit set data.service)")
	restoredNotRouted(t, m.labels())
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())

	// A changed value of the plugin's own key is restored and reported the same way.
	require.NoError(t, m.c.Get(context.Background(), key, cm))
	cm.Data["deployment"] = "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        image: evil/proxy\n"
	require.NoError(t, m.c.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")))
	res = m.apply()
	require.NoError(t, res.Err())
	require.NoError(t, m.c.Get(context.Background(), key, cm))
	assert.Equal(t, want, cm.Data)
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "ConfigMap/waypoint-seccomp was changed by another writer (kubectl-edit set data.deployment)")
	restoredNotRouted(t, m.labels())
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

// With the opt-in on, a foreign key in the plugin's patch ConfigMap that cannot be restored (the
// restoring write fails) takes the namespace off the waypoint at once: istiod applies every key
// to the waypoint it builds, so until the ConfigMap is restored the waypoint may not be the one
// the owner policy runs in. The call whose restore succeeds still withholds routing (istiod may not
// have rebuilt the waypoint yet); the next one routes again.
func TestAnUnrestoredPatchConfigMapWithdrawsTheRouting(t *testing.T) {
	m := newMesh(t).withPatch()
	m.enrol()
	cm := m.configMap("waypoint-seccomp")
	want := maps.Clone(cm.Data)
	cm.Data["deployment"] = "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        image: evil/proxy\n"
	cm.Data["extra"] = "x"
	require.NoError(t, m.c.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")))

	m.fail = func(verb string, obj any) error {
		if describe(obj) == "ConfigMap/waypoint-seccomp" {
			return apierrors.NewServiceUnavailable("injected")
		}
		return nil
	}
	res := m.apply()
	require.Error(t, res.Err())
	labels := m.labels()
	assert.Empty(t, labels[useWaypoint], "routed through a waypoint istiod builds from another writer's patch")
	assert.Empty(t, labels[ingressUseWaypoint])
	assert.Equal(t, "ambient", labels[dataplaneMode], "the ztunnel policy still protects the pods")
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "ConfigMap/waypoint-seccomp was changed by another writer (kubectl-edit set data.deployment, data.extra)")

	m.fail = nil
	res = m.apply()
	require.NoError(t, res.Err())
	assert.Equal(t, want, m.configMap("waypoint-seccomp").Data, "the foreign key and the changed value are gone")
	restoredNotRouted(t, m.labels())
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
}

func (m *mesh) configMap(name string) *corev1.ConfigMap {
	m.t.Helper()
	cm := &corev1.ConfigMap{}
	require.NoError(m.t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm))
	return cm
}

// FINDING (fail-open, not detected; anyone who may write AuthorizationPolicies in the namespace:
// an admin's kubectl apply, a GitOps tool, another Kubeflow component; Kubeflow's default
// kubeflow-edit and kubeflow-admin roles only read them). ALLOW policies are OR'ed. One more
// selector-less ALLOW policy whose rules ztunnel can enforce (here rules: [{}], "allow all") makes
// the ztunnel policy restrict nothing, and one more ALLOW policy attached to the waypoint makes the
// owner policy restrict nothing. The authz plugin now reports each such policy by name, as a
// warning (the policy is not the plugin's to change); SECURITY.md says the guarantees hold only
// while no one else may write AuthorizationPolicies in user namespaces.
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
