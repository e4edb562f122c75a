package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// On the real API server, whose managedFields follow the CRDs' schemas: a change of the plugin's
// own wish (a new owner) is told from a forged desired-hash by hashing what the plugin's Apply
// entry holds. The genuine change keeps routing and warns of nothing; the forged one is restored,
// reported, and routing is off until the next call.
func TestADesiredHashIsTrustedOnlyWhenItIsTheHashOfThePluginsOwnFieldsOnTheAPIServer(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "forged-hash")
	r := runnerFor(t, c, config.ModeAmbient)
	routeThroughWaypoint(t, r, c, p)

	// A new owner: the owner policy is rewritten from another body of the plugin's.
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(p), p))
	p.Spec.Owner = fixture.User("bob@example.com")
	require.NoError(t, c.Update(ctx, p))
	n := &corev1.Namespace{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: p.Name}, n))
	n.Annotations[ownership.OwnerAnnotation] = "bob@example.com"
	require.NoError(t, c.Update(ctx, n))
	ns := namespaceLabels(t, c, p.Name)
	require.Equal(t, "waypoint", ns["istio.io/use-waypoint"])
	res := r.Apply(ctx, p)
	require.NoError(t, res.Err())
	assert.Equal(t, "waypoint", namespaceLabels(t, c, p.Name)["istio.io/use-waypoint"], "a change of the plugin's own wish keeps routing")
	assert.Empty(t, res.Warnings())
	assert.Empty(t, res.Waiting())

	// The same kind of change under the plugin's manager with a made-up desired-hash.
	pol := &istiosecurityv1.AuthorizationPolicy{}
	key := client.ObjectKey{Namespace: p.Name, Name: config.DefaultOwnerPolicyName}
	require.NoError(t, c.Get(ctx, key, pol))
	applyAs(t, c, pol, plugin.FieldManager("authz"), func(u map[string]any) {
		rule := u["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any)
		rule["when"] = []any{map[string]any{"key": "request.headers[kubeflow-userid]", "values": []any{"mallory@example.com"}}}
		u["metadata"].(map[string]any)["annotations"].(map[string]any)[plugin.DesiredHashAnnotation] = "0123456789abcdef"
	})
	res = r.Apply(ctx, p)
	require.NoError(t, res.Err())
	assert.NotContains(t, namespaceLabels(t, c, p.Name), "istio.io/use-waypoint", "routed through the restoring write of a forged change")
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "was changed by a writer using the plugin's own field manager")
	require.NoError(t, c.Get(ctx, key, pol))
	assert.NotContains(t, pol.Spec.String(), "mallory", "the forged owner stays")
	routeThroughWaypoint(t, r, c, p)
}
