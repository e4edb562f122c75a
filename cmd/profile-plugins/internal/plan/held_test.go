package plan

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

// An admin deletes the ztunnel policy of an enrolled namespace without pods: its finalizer keeps
// it in force while the plugin wants it, so `kubectl delete` waits. The plan says so, and why,
// where the admin reads the namespace's state: in its notes.
func TestPlanSaysAZtunnelPolicyIsHeldByItsFinalizer(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	cfg := config.Default()
	fixture.Platform(t, c, cfg)
	p := createProfile(t, c, "held")
	r, err := plugins.NewRunner(c, cfg)
	require.NoError(t, err)
	require.NoError(t, r.Apply(ctx, p).Err())
	programWaypoint(t, c, "held")
	require.NoError(t, r.Apply(ctx, p).Err())
	ztunnel := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "held", Name: cfg.Authorization.ZtunnelPolicyName}, ztunnel))
	require.NoError(t, c.Delete(ctx, ztunnel))

	js, _ := planOutput(t, env.Base, options{profiles: []string{"held"}, output: "json"})
	report := decodeReport(t, js)
	require.Len(t, report.Namespaces, 1)
	var notes []string
	for _, n := range report.Namespaces[0].Notes {
		notes = append(notes, n.Message)
	}
	joined := strings.Join(notes, "\n")
	assert.Contains(t, joined, cfg.Authorization.ZtunnelPolicyName+" is held")
	assert.Contains(t, joined, "istio.io/dataplane-mode=ambient requires it")
}
