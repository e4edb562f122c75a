package kubeflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
)

// A revoke the API server failed is returned as the error, for controller-runtime's backoff: the
// finalizer must not be removed while the protection it revokes may still be half there. It is
// not logged as an input error that lets the finalizer go.
func TestRevokeReturnsAnAPIFailure(t *testing.T) {
	down := apierrors.NewServiceUnavailable("the API server is down")
	c := fake.NewClientBuilder().WithScheme(controllerScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return down
		},
	}).Build()
	runner, err := profileplugins.NewRunner(c, profileplugins.DefaultConfig())
	require.NoError(t, err)
	in := &kubeflow.Integration{Runner: runner}

	var lines []string
	_, err = in.Revoke(logged(&lines), aliceProfile("alice@example.com"))
	require.Error(t, err)
	assert.Empty(t, containing(lines, "revoke reported input errors"), "the API error is returned, not logged as an input error: %v", lines)
	assert.True(t, apierrors.IsServiceUnavailable(err) || errors.Is(err, down), "the API error: %v", err)
	assert.False(t, errors.Is(err, reconcile.TerminalError(nil)), "retried, not terminal: %v", err)
}
