package kubeflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeflow-ambient/profile-plugins/examples/internal/plugins"
	"github.com/kubeflow-ambient/profile-plugins/examples/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
	"github.com/kubeflow-ambient/profile-plugins/plugin/profilev1"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestAdapterAppliesAndRevokes(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(plugin.NewScheme()).WithReturnManagedFields().
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alice"}}).Build()
	ps, err := plugins.New(config.Default())
	require.NoError(t, err)
	runner, err := plugin.NewRunner(c, ps...)
	require.NoError(t, err)

	var controllerPlugin kubeflow.Plugin = &kubeflow.MeshPlugins{Runner: runner}
	r := &kubeflow.ProfileReconciler{Client: c, Log: logr.Discard()}
	p := &profilev1.Profile{
		ObjectMeta: metav1.ObjectMeta{Name: "alice", UID: "u-1"},
		Spec:       profilev1.ProfileSpec{Owner: rbacv1.Subject{Kind: "User", Name: "alice@example.com"}},
	}

	err = controllerPlugin.ApplyPlugin(r, p)
	require.True(t, errors.Is(err, kubeflow.ErrWaiting), "the waypoint is not Programmed yet: %v", err)
	ns := &corev1.Namespace{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: "alice"}, ns))
	assert.Equal(t, "ambient", ns.Labels["istio.io/dataplane-mode"])

	require.NoError(t, controllerPlugin.RevokePlugin(r, p))
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: "alice"}, ns))
	assert.NotContains(t, ns.Labels, "istio.io/dataplane-mode")
	require.NoError(t, controllerPlugin.RevokePlugin(r, p), "revoke is idempotent")
}
