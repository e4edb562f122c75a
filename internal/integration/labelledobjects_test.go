package integration

// Attack review of Dec 1, finding A, on the real API server: "made by the plugin" was judged by
// labels alone. Objects with copied managed labels were pruned, and a patch ConfigMap replaced by
// one with copied labels and another controller wedged the namespace. Now only the Profile as
// controller makes an object the plugins' own.

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// copied are the managed labels of the named plugin, as an editor copies them from an object the
// plugin made.
func copied(pluginName string) map[string]string {
	return map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: pluginName}
}

// routeThroughWaypoint applies, playing istiod in between, until the namespace is routed through
// its waypoint and a call writes nothing and waits for nothing.
func routeThroughWaypoint(t *testing.T, r *runner.Runner, c client.Client, p *profilev1.Profile) {
	t.Helper()
	var res *runner.Result
	for range 8 {
		res = r.Apply(context.Background(), p)
		require.NoError(t, res.Err())
		routed := namespaceLabels(t, c, p.Name)["istio.io/use-waypoint"] == "waypoint"
		if routed && !res.Changed() && len(res.Waiting()) == 0 {
			return
		}
		if exists(t, c, &gatewayv1.Gateway{}, p.Name, "waypoint") {
			programWaypoint(t, c, p.Name)
		}
	}
	t.Fatalf("namespace %s is not routed through its waypoint at rest after 8 calls: %s; waiting %v", p.Name, res, res.Waiting())
}

func seccompRunner(t *testing.T, c client.Client) *runner.Runner {
	t.Helper()
	cfg := config.Default()
	cfg.Mesh.Waypoint.SeccompPatch = ptr.To(true)
	require.NoError(t, cfg.Validate())
	r, err := profileplugins.NewRunner(c, cfg)
	require.NoError(t, err)
	return r
}

// resourceVersions maps each object to its resourceVersion as stored now.
func resourceVersions(t *testing.T, c client.Client, objs ...client.Object) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, obj := range objs {
		cur := obj.DeepCopyObject().(client.Object)
		require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(obj), cur), "%s is gone", obj.GetName())
		out[obj.GetName()] = cur.GetResourceVersion()
	}
	return out
}

// A tenant's DENY policy, a ConfigMap and a second Gateway with copied labels (one with another
// object as its controller) survive every reconcile and the revoke, untouched, each reported once
// per call; the namespace stays routed and the calls write nothing.
func TestLabelledObjectsOfATenantArePrunedNeitherByApplyNorByRevokeOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "labelled-tenant")
	r := runnerFor(t, c, config.ModeAmbient)
	routeThroughWaypoint(t, r, c, p)

	deny := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tenant-deny", Namespace: p.Name, Labels: copied("authz")},
		Spec: securityv1beta1.AuthorizationPolicy{Action: securityv1beta1.AuthorizationPolicy_DENY,
			Rules: []*securityv1beta1.Rule{{From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{Namespaces: []string{"intruder"}}}}}}}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tenant-config", Namespace: p.Name, Labels: copied("waypoint")},
		Data: map[string]string{"k": "v"}}
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "tenant-gateway", Namespace: p.Name, Labels: copied("waypoint"),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "tenant-app", UID: "0d0d0d0d-0000-4000-8000-000000000001", Controller: ptr.To(true)}}},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "istio", Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: "HTTP"}}}}
	tenant := []client.Object{deny, cm, gw}
	for _, obj := range tenant {
		require.NoError(t, c.Create(ctx, obj, client.FieldOwner("tenant")))
	}
	before := resourceVersions(t, c, tenant...)

	for range 2 {
		writes := env.Requests.Writes()
		res := r.Apply(ctx, p)
		require.NoError(t, res.Err())
		assert.Equal(t, writes, env.Requests.Writes(), "the tenant's labelled objects made the runner write")
		warnings := strings.Join(res.Warnings(), "\n")
		for _, ref := range []string{"AuthorizationPolicy.security.istio.io/tenant-deny", "ConfigMap/tenant-config", "Gateway.gateway.networking.k8s.io/tenant-gateway"} {
			assert.Equal(t, 1, strings.Count(warnings, ref+" carries the labels"), "%s reported once:\n%s", ref, warnings)
		}
		assert.Equal(t, "waypoint", namespaceLabels(t, c, p.Name)["istio.io/use-waypoint"])
	}
	assert.Equal(t, before, resourceVersions(t, c, tenant...), "Apply changed the tenant's objects")

	res := r.Revoke(ctx, p)
	require.NoError(t, res.Err())
	assert.Equal(t, before, resourceVersions(t, c, tenant...), "Revoke changed or deleted the tenant's objects")
	assert.False(t, exists(t, c, &gatewayv1.Gateway{}, p.Name, "waypoint"), "the plugins' own waypoint is revoked")
}

// With mesh.waypoint.seccompPatch on, an editor replaces the patch ConfigMap by one with copied
// labels and another controller. The API server refuses the runner's apply onto it (one controller
// only), which used to fail every reconcile with routing withdrawn. Now the runner writes nothing
// to it: the call completes with a ConflictError, the Gateway stops referencing it, routing is
// withheld and says why; deleted, it is replaced by the plugin's own and routing comes back.
func TestAPatchConfigMapReplacedWithCopiedLabelsNeitherWedgesNorRoutesOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "labelled-patch")
	r := seccompRunner(t, c)
	routeThroughWaypoint(t, r, c, p)

	key := client.ObjectKey{Namespace: p.Name, Name: "waypoint-seccomp"}
	require.NoError(t, c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}))
	impostor := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: p.Name, Labels: copied("waypoint"),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "editor", UID: "0d0d0d0d-0000-4000-8000-000000000002", Controller: ptr.To(true)}}},
		Data: map[string]string{"deployment": "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        image: evil/proxy\n"}}
	require.NoError(t, c.Create(ctx, impostor, client.FieldOwner("editor")))

	// Why it wedged: the plugin's body names the Profile as controller, and the API server allows one.
	body := corev1ac.ConfigMap(key.Name, p.Name).WithLabels(copied("waypoint")).WithOwnerReferences(metav1ac.OwnerReference().
		WithAPIVersion("kubeflow.org/v1").WithKind("Profile").WithName(p.Name).WithUID(p.UID).WithController(true))
	err := c.Apply(ctx, body, client.FieldOwner(plugin.FieldManager("waypoint")), client.ForceOwnership, client.DryRunAll)
	require.True(t, apierrors.IsInvalid(err), "the API server takes a second controller: %v", err)

	rv := resourceVersions(t, c, impostor)
	for call := range 2 {
		res := r.Apply(ctx, p)
		var conflict *runner.ConflictError
		require.True(t, errors.As(res.Err(), &conflict), "call %d: want a ConflictError, got %v", call, res.Err())
		assert.Equal(t, key.Name, conflict.Ref.Name)
		assert.False(t, res.Retryable(), "call %d failed on an API error: %v", call, res.Err())
		labels := namespaceLabels(t, c, p.Name)
		assert.NotContains(t, labels, "istio.io/use-waypoint", "routed through a waypoint whose patch is another writer's")
		assert.NotContains(t, labels, "istio.io/ingress-use-waypoint")
		assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the ztunnel policy still closes the namespace")
		assert.Contains(t, strings.Join(res.Waiting(), "\n"),
			"does not reference ConfigMap waypoint-seccomp (mesh.waypoint.seccompPatch) while another writer's holds its name, and istio.io/use-waypoint waits")
		gw := &gatewayv1.Gateway{}
		require.True(t, exists(t, c, gw, p.Name, "waypoint"))
		assert.Nil(t, gw.Spec.Infrastructure, "the Gateway still references the editor's ConfigMap")
		// istiod programs the waypoint without the patch; routing still waits for the plugin's own.
		programWaypoint(t, c, p.Name)
	}
	assert.Equal(t, rv, resourceVersions(t, c, impostor), "the editor's ConfigMap was written")
	writes := env.Requests.Writes()
	r.Apply(ctx, p)
	assert.Equal(t, writes, env.Requests.Writes(), "everything but the conflict has converged")

	require.NoError(t, c.Delete(ctx, impostor))
	routeThroughWaypoint(t, r, c, p)
	own := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, key, own))
	assert.Equal(t, p.UID, metav1.GetControllerOf(own).UID, "the plugin's own patch, controlled by the Profile")
}

// A Profile deleted and created again under the same name has a new UID. In a namespace an admin
// made (owned by annotation, so it outlives the Profile), what the runner made for the earlier
// Profile stays controlled by its UID until garbage collection deletes it (envtest runs no garbage
// collector: the test deletes them as it would). Meanwhile the runner writes none of it and deletes
// none of it, reports each as the earlier Profile's, withdraws routing, and holds
// istio.io/dataplane-mode for the running pod, which the earlier ztunnel policy still protects.
// Afterwards the namespace converges under the new Profile. A namespace the earlier Profile
// controls is refused outright: the profiles controller recreates it.
func TestAProfileRecreatedUnderItsNameWaitsForTheEarlierOnesObjectsOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "recreated")
	r := runnerFor(t, c, config.ModeAmbient)
	routeThroughWaypoint(t, r, c, p)
	require.NoError(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: p.Name}}))
	require.NoError(t, c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: p.Name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}))

	earlier := []client.Object{
		&istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: p.Name, Name: config.DefaultOwnerPolicyName}},
		&istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: p.Name, Name: config.DefaultZtunnelPolicyName}},
		&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: p.Name, Name: "waypoint"}},
	}
	before := resourceVersions(t, c, earlier...)
	require.NoError(t, c.Delete(ctx, p))
	again := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: p.Name}, Spec: profilev1.ProfileSpec{Owner: fixture.User("alice@example.com")}}
	require.NoError(t, c.Create(ctx, again))
	require.NotEqual(t, p.UID, again.UID)

	for range 2 {
		res := r.Apply(ctx, again)
		var conflict *runner.ConflictError
		require.ErrorAs(t, res.Err(), &conflict)
		assert.False(t, res.Retryable(), "%v", res.Err())
		warnings := strings.Join(res.Warnings(), "\n")
		assert.Contains(t, warnings, "AuthorizationPolicy.security.istio.io/"+config.DefaultZtunnelPolicyName+
			" carries the labels of profile-plugins plugin authz but is not controlled by Profile recreated (uid "+string(again.UID)+
			"): its controller is an earlier Profile \"recreated\" (uid "+string(p.UID)+")")
		assert.Contains(t, warnings, "label istio.io/dataplane-mode=ambient stays although")
		labels := namespaceLabels(t, c, p.Name)
		assert.NotContains(t, labels, "istio.io/use-waypoint", "routed to objects the new Profile does not control")
		assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the running pod stays in ambient")
	}
	assert.Equal(t, before, resourceVersions(t, c, earlier...), "the earlier Profile's objects were written or deleted")

	for _, obj := range earlier { // garbage collection
		require.NoError(t, c.Delete(ctx, obj))
	}
	routeThroughWaypoint(t, r, c, again)
	for _, obj := range earlier {
		cur := obj.DeepCopyObject().(client.Object)
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(obj), cur))
		assert.Equal(t, again.UID, metav1.GetControllerOf(cur).UID, "%s is the new Profile's", obj.GetName())
	}

	// The profiles controller's own namespaces are controlled by their Profile: an earlier one's
	// namespace is not the new Profile's to write into at all.
	q := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "recreated-controlled"}, Spec: profilev1.ProfileSpec{Owner: fixture.User("alice@example.com")}}
	require.NoError(t, c.Create(ctx, q))
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: q.Name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: q.Name, UID: q.UID, Controller: ptr.To(true)}}}}))
	routeThroughWaypoint(t, r, c, q)
	require.NoError(t, c.Delete(ctx, q))
	qAgain := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: q.Name}, Spec: q.Spec}
	require.NoError(t, c.Create(ctx, qAgain))
	writes := env.Requests.Writes()
	res := r.Apply(ctx, qAgain)
	var refused *ownership.NamespaceError
	require.ErrorAs(t, res.Err(), &refused)
	assert.Equal(t, writes, env.Requests.Writes(), "wrote into the earlier Profile's namespace")
}
