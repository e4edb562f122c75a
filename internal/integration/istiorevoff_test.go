package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// FINDING (fail-open, persistent and silent; anyone who may update AuthorizationPolicies or
// Gateways in the namespace). istiod reads a policy labelled istio.io/rev only in that revision
// (istio/istio pkg/config/model.go, LabelsInRevision, the informer filter of ztunnel's and the
// proxies' config), so istio.io/rev=off on the ztunnel policy leaves ztunnel without the
// namespace's ALLOW policy, and pod-IP traffic from any tenant gets in; on the owner policy the
// waypoint stops checking the owner; on the Gateway no istiod manages the waypoint any more. The
// runner kept only istio.io/dry-run as meaning metadata, so the label stayed, the Profile said
// everything applied, and the namespace stayed enrolled and routed. Now every key of Istio's
// domain is content: on the real API server, whoever writes the label and however (an Update, a
// forced apply by another manager or under the plugin's own name, an Update that clears the
// managedFields so no writer is recorded), the runner removes it in the same call, names the
// writer, withholds use-waypoint for that call, routes again once the restore stands, and is quiet
// after.
func TestIstioRevOffOnTheProtectiveObjectsIsRestoredOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "istio-rev-off")
	r := runnerFor(t, c, config.ModeAmbient)
	require.NoError(t, r.Apply(ctx, p).Err())
	programWaypoint(t, c, p.Name)
	converged(t, r, p)
	require.Equal(t, config.DefaultWaypointName, namespaceLabels(t, c, p.Name)["istio.io/use-waypoint"], "routed before the attack")

	type target struct {
		name, plugin, ref string
		obj               func() client.Object
	}
	policy := func() client.Object { return &istiosecurityv1.AuthorizationPolicy{} }
	ztunnel := target{config.DefaultZtunnelPolicyName, "authz", "AuthorizationPolicy.security.istio.io/" + config.DefaultZtunnelPolicyName, policy}
	owner := target{config.DefaultOwnerPolicyName, "authz", "AuthorizationPolicy.security.istio.io/" + config.DefaultOwnerPolicyName, policy}
	waypoint := target{config.DefaultWaypointName, "waypoint", "Gateway.gateway.networking.k8s.io/" + config.DefaultWaypointName,
		func() client.Object { return &gatewayv1.Gateway{} }}
	label := func(u map[string]any) {
		u["metadata"].(map[string]any)["labels"].(map[string]any)["istio.io/rev"] = "off"
	}
	writers := []struct {
		name  string
		write func(obj client.Object, pluginName string)
		// warning is what the runner's warning says of the writer.
		warning func(pluginName string) string
	}{{
		name: "kubectl edit (an Update)",
		write: func(obj client.Object, _ string) {
			obj.GetLabels()["istio.io/rev"] = "off"
			require.NoError(t, c.Update(ctx, obj, client.FieldOwner("kubectl-edit")))
		},
		warning: func(string) string {
			return "was changed by another writer (kubectl-edit set metadata.labels.istio.io/rev)"
		},
	}, {
		// kubectl apply --server-side --force-conflicts of a manifest with just the label.
		name: "a forced apply of another manager",
		write: func(obj client.Object, _ string) {
			gvk, err := c.GroupVersionKindFor(obj)
			require.NoError(t, err)
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
				"metadata": map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace(), "labels": map[string]any{"istio.io/rev": "off"}}}}
			require.NoError(t, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("argocd"), client.ForceOwnership))
		},
		warning: func(string) string { return "was changed by another writer (argocd set metadata.labels.istio.io/rev)" },
	}, {
		// The object as it stands plus the label, under the plugin's own manager name.
		name:  "a forced apply under the plugin's own manager",
		write: func(obj client.Object, pluginName string) { applyAs(t, c, obj, plugin.FieldManager(pluginName), label) },
		warning: func(pluginName string) string {
			return "was changed by a writer using the plugin's own field manager " + plugin.FieldManager(pluginName) + " (set metadata.labels.istio.io/rev"
		},
	}}
	// Last, and on the policies only: an Update that clears the managedFields records no writer.
	// (On the Gateway the API server then files its defaulted allowedRoutes under
	// before-first-apply, content the runner does not set and cannot take ownership of back; see
	// SECURITY.md.)
	cleared := writers[0]
	cleared.name = "an Update that clears the managedFields"
	cleared.write = func(obj client.Object, _ string) {
		obj.GetLabels()["istio.io/rev"] = "off"
		obj.SetManagedFields([]metav1.ManagedFieldsEntry{{}})
		require.NoError(t, c.Update(ctx, obj, client.FieldOwner("kubectl-edit")))
	}
	cleared.warning = func(string) string {
		return "was changed by another writer (a writer the API server did not record set metadata.labels.istio.io/rev)"
	}
	type step struct {
		target
		writer int
	}
	var steps []step
	for _, o := range []target{ztunnel, owner, waypoint} {
		for i := range writers {
			steps = append(steps, step{o, i})
		}
	}
	writers = append(writers, cleared)
	steps = append(steps, step{ztunnel, len(writers) - 1}, step{owner, len(writers) - 1})
	for _, st := range steps {
		o, w := st.target, writers[st.writer]
		what, key := o.name, client.ObjectKey{Namespace: p.Name, Name: o.name}
		obj := o.obj()
		require.NoError(t, c.Get(ctx, key, obj))
		w.write(obj, o.plugin)
		require.NoError(t, c.Get(ctx, key, obj))
		require.Equal(t, "off", obj.GetLabels()["istio.io/rev"], "%s by %s: the label took effect on the server", what, w.name)
		if strings.Contains(w.name, "clears") {
			require.Empty(t, obj.GetManagedFields(), "%s: the API server recorded no writer", what)
		}

		res := r.Apply(ctx, p)
		require.NoError(t, res.Err(), "%s by %s", what, w.name)
		require.NoError(t, c.Get(ctx, key, obj))
		assert.NotContains(t, obj.GetLabels(), "istio.io/rev", "%s by %s: the label is gone in the same call", what, w.name)
		assert.Contains(t, strings.Join(res.Warnings(), "\n"), o.ref+" "+w.warning(o.plugin), "%s by %s", what, w.name)
		labels := namespaceLabels(t, c, p.Name)
		assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "%s by %s", what, w.name)
		assert.NotContains(t, labels, "istio.io/use-waypoint", "%s by %s: routed while the restored version may not be in effect", what, w.name)
		assert.NotContains(t, labels, "istio.io/ingress-use-waypoint", "%s by %s", what, w.name)

		require.NoError(t, r.Apply(ctx, p).Err(), "%s by %s", what, w.name)
		assert.Equal(t, config.DefaultWaypointName, namespaceLabels(t, c, p.Name)["istio.io/use-waypoint"],
			"%s by %s: routed again once the restore stands", what, w.name)
		writes := env.Requests.Writes()
		res = r.Apply(ctx, p)
		require.NoError(t, res.Err())
		assert.Equal(t, writes, env.Requests.Writes(), "%s by %s: quiet once restored", what, w.name)
		assert.Empty(t, res.Warnings(), "%s by %s", what, w.name)
	}
}
