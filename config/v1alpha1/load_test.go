package v1alpha1_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// A file that cannot be read is that error, not a parse of nothing; a valid file loads.
func TestLoad(t *testing.T) {
	_, err := config.Load(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorIs(t, err, fs.ErrNotExist)

	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("apiVersion: "+config.APIVersion+"\nkind: "+config.Kind+"\nmesh: {mode: sidecar}\n"), 0o600))
	c, err := config.Load(path)
	require.NoError(t, err)
	assert.Equal(t, config.ModeSidecar, c.Mesh.Mode)
}

// The authorization section's errors come in field order, whatever order its maps iterate in,
// so the same file always gives the same message.
func TestAuthorizationErrorsComeInFieldOrder(t *testing.T) {
	doc := header + `authorization:
  ztunnelPolicyName: 'Z Z'
  userIdHeader: 'user id'
  principals: {ingressGateway: '*', katibController: '*', notebookController: '*', pipelinesUI: '*'}
  healthPaths: [healthz]
`
	_, err := config.Parse([]byte(doc))
	require.Error(t, err)
	msg := err.Error()
	order := []string{
		"authorization.healthPaths[0]",
		"authorization.principals.ingressGateway",
		"authorization.principals.katibController",
		"authorization.principals.notebookController",
		"authorization.principals.pipelinesUI",
		"authorization.userIdHeader",
		"authorization.ztunnelPolicyName",
	}
	last := -1
	for _, f := range order {
		i := strings.Index(msg, f)
		require.GreaterOrEqual(t, i, 0, "%s missing from %s", f, msg)
		assert.Greater(t, i, last, "%s out of order in %s", f, msg)
		last = i
	}
}
