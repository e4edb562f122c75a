package runner_test

// Whose object is whose (observe.go, disown): the managed labels only claim an object; with the Profile as its
// controller it is the plugins' own. Anything else with those labels is another writer's: reported,
// never pruned, restored or adopted, and under a wanted name a ConflictError that fails closed
// without stopping the rest.

import (
	"context"
	"errors"
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// copiedLabels are the managed labels of the named plugin, as a namespace editor copies them from
// `kubectl get -o yaml` of one of its objects.
func copiedLabels(pluginName string) map[string]string {
	return map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: pluginName}
}

// controlledBy is an owner reference that makes obj's controller the named object of kind.
func controlledBy(apiVersion, kind, name, uid string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: ptrTo(true)}}
}

// An editor's objects that carry copied managed labels: a DENY policy (deleting it would loosen the
// namespace), a ConfigMap and a second Gateway. None is pruned, by Apply or Revoke; each is named
// in one warning per call; the namespace stays as it is, with no write.
func TestLabelledObjectsOfOtherWritersAreNeverPruned(t *testing.T) {
	t.Parallel()
	deny := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tenant-deny", Namespace: ns, Labels: copiedLabels(authz.PluginName)},
		Spec: securityv1beta1.AuthorizationPolicy{Action: securityv1beta1.AuthorizationPolicy_DENY,
			Rules: []*securityv1beta1.Rule{{From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{Namespaces: []string{"intruder"}}}}}}}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tenant-config", Namespace: ns, Labels: copiedLabels(waypoint.PluginName)},
		Data: map[string]string{"k": "v"}}
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "tenant-gateway", Namespace: ns, Labels: copiedLabels(waypoint.PluginName),
		OwnerReferences: controlledBy("apps/v1", "Deployment", "tenant-app", "d-1")},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "istio", Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: "HTTP"}}}}
	m := newMesh(t)
	m.enrol()
	for _, obj := range []client.Object{deny, cm, gw} {
		require.NoError(t, m.c.Create(context.Background(), obj.DeepCopyObject().(client.Object), client.FieldOwner("editor")))
	}
	names := []string{"AuthorizationPolicy.security.istio.io/tenant-deny", "ConfigMap/tenant-config", "Gateway.gateway.networking.k8s.io/tenant-gateway"}
	for range 2 {
		res := m.converged("labelled objects of another writer change nothing")
		enrolled(t, m.labels())
		warnings := strings.Join(res.Warnings(), "\n")
		for _, name := range names {
			assert.Equal(t, 1, strings.Count(warnings, name+" carries the labels of profile-plugins plugin"), "%s is reported once per call:\n%s", name, warnings)
		}
		assert.Contains(t, warnings, `its controller is Deployment "tenant-app"`)
	}
	res := m.runner.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	for _, w := range m.writes {
		assert.NotContains(t, w, "tenant-", "Revoke wrote one of the editor's objects")
	}
	for _, obj := range []client.Object{deny, cm, gw} {
		cur := obj.DeepCopyObject().(client.Object)
		require.NoError(t, m.c.Get(context.Background(), client.ObjectKeyFromObject(obj), cur), "%s was deleted", obj.GetName())
	}
	assert.Nil(t, m.policy(ownerName), "the plugins' own are revoked as before")
}

// With mesh.waypoint.seccompPatch on, an editor replaces the patch ConfigMap by one with the copied
// labels and another object as its controller. Before, every reconcile tried to restore it and
// failed on its controller reference, with istio.io/use-waypoint withdrawn, forever. Now it is a
// ConflictError: nothing is written to it, the call completes, routing is withheld and says why,
// the Gateway stops referencing it and the rest stays in place; once it is deleted, the next
// reconciles create the plugin's own and route again.
func TestALabelledPatchConfigMapOfAnotherWriterFailsClosedWithoutWedging(t *testing.T) {
	t.Parallel()
	m := newMesh(t).withPatch()
	m.enrol()
	require.NoError(t, m.c.Delete(context.Background(), m.configMap("waypoint-seccomp")))
	impostor := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "waypoint-seccomp", Namespace: ns, Labels: copiedLabels(waypoint.PluginName),
		OwnerReferences: controlledBy("apps/v1", "Deployment", "editor", "d-2")},
		Data: map[string]string{"deployment": "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        image: evil/proxy\n"}}
	require.NoError(t, m.c.Create(context.Background(), impostor.DeepCopy(), client.FieldOwner("editor")))
	before := m.configMap("waypoint-seccomp")

	for i := range 2 {
		m.writes = nil
		res := m.apply()
		var conflict *runner.ConflictError
		require.True(t, errors.As(res.Err(), &conflict), "call %d: want a ConflictError, got %v", i, res.Err())
		assert.Equal(t, "waypoint-seccomp", conflict.Ref.Name)
		assert.Contains(t, conflict.NotControlled, `Deployment "editor"`)
		assert.ErrorContains(t, conflict, "carries the labels of profile-plugins plugin waypoint but is not controlled by the Profile")
		for _, w := range m.writes {
			assert.NotContains(t, w, "ConfigMap/waypoint-seccomp", "call %d wrote the editor's ConfigMap", i)
		}
		labels := m.labels()
		assert.NotContains(t, labels, useWaypoint, "routed through a waypoint whose patch is another writer's")
		assert.NotContains(t, labels, ingressUseWaypoint)
		assert.Equal(t, "ambient", labels[dataplaneMode], "the ztunnel policy still protects the pods")
		assert.Contains(t, strings.Join(res.Waiting(), "\n"), "does not reference ConfigMap waypoint-seccomp (mesh.waypoint.seccompPatch) while another writer's holds its name, and istio.io/use-waypoint waits")
		gw := &gatewayv1.Gateway{}
		require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
		assert.Nil(t, gw.Spec.Infrastructure, "the Gateway references the editor's ConfigMap")
		assert.NotNil(t, m.policy(ztunnelName))
		assert.NotNil(t, m.policy(ownerName))
	}
	assert.Empty(t, m.writes, "the second call finds everything else converged")
	assert.Equal(t, before.ResourceVersion, m.configMap("waypoint-seccomp").ResourceVersion)

	require.NoError(t, m.c.Delete(context.Background(), before))
	for range 3 {
		require.NoError(t, m.apply().Err())
		m.program()
	}
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
	own := m.configMap("waypoint-seccomp")
	assert.True(t, plugin.IsManagedBy(own.Labels, waypoint.PluginName))
	assert.Equal(t, testProfile().UID, metav1.GetControllerOf(own).UID)
	m.converged("routed again through the plugin's own patch")
}

// An owner policy with copied labels and no controller is never adopted, even with
// authorization.adoptOwnerPolicy: that would restore over another writer's object. The waypoint
// is not made on it and nothing is routed.
func TestALabelledObjectOfAnotherWriterIsNeverAdopted(t *testing.T) {
	t.Parallel()
	impostor := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ownerName, Namespace: ns, Labels: copiedLabels(authz.PluginName)},
		Spec: securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{}},
			TargetRefs: []*typev1beta1.PolicyTargetReference{{Group: gatewayv1.GroupName, Kind: "Gateway", Name: "waypoint"}}}}
	m := newMesh(t, impostor)
	m.cfg.Authorization.AdoptOwnerPolicy = true
	for range 2 {
		res := m.apply()
		var conflict *runner.ConflictError
		require.ErrorAs(t, res.Err(), &conflict)
		assert.Equal(t, ownerName, conflict.Ref.Name)
		assert.NotContains(t, strings.Join(res.Warnings(), "\n"), "adopted AuthorizationPolicy")
	}
	for _, w := range m.writes {
		assert.False(t, strings.HasSuffix(w, " AuthorizationPolicy/"+ownerName), "wrote the editor's owner policy: %v", m.writes)
	}
	assert.False(t, apierrors.IsNotFound(m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: ownerName}, &istiosecurityv1.AuthorizationPolicy{})))
	err := m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, &gatewayv1.Gateway{})
	assert.True(t, apierrors.IsNotFound(err), "a waypoint made on another writer's owner policy: %v", err)
	assert.NotContains(t, m.labels(), useWaypoint)
	assert.Equal(t, "ambient", m.labels()[dataplaneMode])
}

// An allow-all policy with copied labels is another writer's to the plugins too: the access plugin
// reports it, as any foreign allow-all policy, instead of taking it for its own.
func TestALabelledAllowAllPolicyIsReportedAsAnotherWritersPolicy(t *testing.T) {
	t.Parallel()
	allowAll := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-all", Namespace: ns, Labels: copiedLabels(authz.PluginName)},
		Spec: securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{}}}}
	m := newMesh(t, allowAll)
	res := m.apply()
	require.NoError(t, res.Err())
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "AuthorizationPolicy allow-all (not made by this plugin) admits every caller at ztunnel")
}

// A Profile deleted and created again with the same name has a new UID; what the runner made for
// the earlier one is controlled by the old UID until garbage collection deletes it (the namespace
// survives here: an admin made it and it is owned by annotation). Meanwhile nothing of it is
// written or deleted, each object is reported as the earlier Profile's, the names the plugins want
// are conflicts, routing is withdrawn and the data-plane label is held for the running pod (the old
// ztunnel policy still stands). Once garbage collection has run, the runner makes its own and the
// namespace converges.
func TestObjectsOfAnEarlierProfileOfTheSameNameWaitForGarbageCollection(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.enrol()
	m.addPod("notebook", nil)
	again := testProfile()
	again.UID = "5555-6666"
	apply := func() *runner.Result { return m.runner.Apply(context.Background(), again) }

	m.writes = nil
	res := apply()
	var conflict *runner.ConflictError
	require.ErrorAs(t, res.Err(), &conflict)
	assert.Contains(t, conflict.NotControlled, `an earlier Profile "alice" (uid 1111-2222)`)
	for _, w := range m.writes {
		assert.True(t, strings.HasPrefix(w, "apply labels"), "only labels are written while the earlier Profile's objects stand: %v", m.writes)
	}
	labels := m.labels()
	assert.NotContains(t, labels, useWaypoint, "routed to objects the new Profile does not control")
	assert.NotContains(t, labels, ingressUseWaypoint)
	assert.Equal(t, "ambient", labels[dataplaneMode], "the pod stays in ambient, under the earlier Profile's ztunnel policy")
	warnings := strings.Join(res.Warnings(), "\n")
	assert.Contains(t, warnings, "label istio.io/dataplane-mode=ambient stays although")
	for _, name := range []string{ztunnelName, ownerName} {
		assert.Contains(t, warnings, "AuthorizationPolicy.security.istio.io/"+name+" carries the labels of profile-plugins plugin authz but is not controlled by Profile alice (uid 5555-6666)")
		assert.NotNil(t, m.policy(name), "the earlier Profile's %s was deleted", name)
	}

	// Garbage collection: the earlier Profile is gone, so are its dependents.
	for _, name := range []string{ztunnelName, ownerName} {
		require.NoError(t, m.c.Delete(context.Background(), m.policy(name)))
	}
	require.NoError(t, m.c.Delete(context.Background(), &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waypoint"}}))
	for range 3 {
		require.NoError(t, apply().Err())
		m.program()
	}
	require.NoError(t, apply().Err())
	enrolled(t, m.labels())
	for _, name := range []string{ztunnelName, ownerName} {
		assert.Equal(t, again.UID, metav1.GetControllerOf(m.policy(name)).UID)
	}
}

// The claims of objects read past a trimming cache are judged and reported once per call, however
// many times the plugins generate in it.
func TestALabelledObjectReadPastTheCacheIsReportedOncePerCall(t *testing.T) {
	selectedWiring = true
	defer func() { selectedWiring = false }()
	m := newMesh(t).withPatch()
	impostor := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "waypoint-seccomp", Namespace: ns, Labels: copiedLabels(waypoint.PluginName)}}
	require.NoError(t, m.c.Create(context.Background(), impostor))
	for range 2 {
		res := m.apply()
		assert.Equal(t, 1, strings.Count(strings.Join(res.Warnings(), "\n"), "ConfigMap/waypoint-seccomp carries the labels"))
		var conflict *runner.ConflictError
		require.ErrorAs(t, res.Err(), &conflict)
		assert.Contains(t, m.apiReads, "get *v1.ConfigMap/waypoint-seccomp", "a trimmed ConfigMap the plugin wants is read in full")
	}
}

// A Runner told that its Reader trims a kind needs an APIReader to read it in full; without one it
// refuses to apply instead of judging trimmed objects intact.
func TestTrimmedKindsWithoutAnAPIReaderAreRefused(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.runner.Trimmed = []schema.GroupKind{{Kind: "ConfigMap"}}
	res := m.apply()
	assert.ErrorContains(t, res.Err(), "APIReader is nil")
	assert.Empty(t, m.writes)
}

// kindsPlugin is a testPlugin that lists only kinds.
type kindsPlugin struct {
	testPlugin
	kinds []client.ObjectList
}

func (p *kindsPlugin) Kinds() []client.ObjectList { return p.kinds }

// A claimed object is reported to the plugin its plugin label names, or, when no plugin of the
// runner has that name, to the plugin that lists its kind.
func TestAClaimIsReportedToThePluginItNamesOrElseToThePluginOfItsKind(t *testing.T) {
	t.Parallel()
	claimed := func(obj client.Object, pluginName string) client.Object {
		obj.SetNamespace(ns)
		obj.SetLabels(copiedLabels(pluginName))
		return obj
	}
	e := newEnv(t,
		claimed(&istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "names-policies"}}, "policies"),
		claimed(&istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "names-nobody"}}, "retired"),
		claimed(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-names-nobody"}}, "retired"),
	)
	configMaps := &kindsPlugin{testPlugin: testPlugin{name: "config-maps"}, kinds: []client.ObjectList{&corev1.ConfigMapList{}}}
	policies := &kindsPlugin{testPlugin: testPlugin{name: "policies"}, kinds: []client.ObjectList{&istiosecurityv1.AuthorizationPolicyList{}}}
	res := newRunner(t, e, configMaps, policies).Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())

	reported := func(i int) (names []string) {
		for _, w := range res.Plugins[i].Warnings {
			names = append(names, strings.Fields(w)[0])
		}
		return names
	}
	assert.Equal(t, []string{"ConfigMap/cm-names-nobody"}, reported(0))
	assert.ElementsMatch(t, []string{"AuthorizationPolicy.security.istio.io/names-nobody", "AuthorizationPolicy.security.istio.io/names-policies"}, reported(1))
}
