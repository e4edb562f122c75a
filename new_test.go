package profileplugins_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/pss"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// The access policies come first, so the mesh's enrolment labels find the ztunnel policy they
// require already written in the same call; Pod Security last.
func TestNewOrdersTheAccessPoliciesFirst(t *testing.T) {
	ps, err := plugins.New(config.Default())
	require.NoError(t, err)
	var names []string
	for _, p := range ps {
		names = append(names, p.Name())
	}
	assert.Equal(t, []string{authz.PluginName, waypoint.PluginName, pss.PluginName}, names)
}

// A Go caller that changes a loaded configuration into one Validate refuses (here a /0 exception
// and an on-behalf-of-user caller on sidecars in ambient mode) gets no plugins and no runner
// (finding 6 of internal/safety/FINDINGS-2.md).
func TestNewAndNewRunnerRefuseAConfigValidateRefuses(t *testing.T) {
	cfg := config.Default()
	cfg.Authorization.L4Exceptions = []config.L4Exception{{IPBlocks: []string{"0.0.0.0/0"}}}
	cfg.Authorization.PlatformCallers[0].DataPlane = config.CallerSidecar
	require.Error(t, cfg.Validate())

	ps, err := plugins.New(cfg)
	assert.Nil(t, ps)
	assert.ErrorContains(t, err, "profile-plugins configuration: ")
	assert.ErrorContains(t, err, "authorization.l4Exceptions[0].ipBlocks[0]")
	r, err := plugins.NewRunner(fake.NewClientBuilder().WithScheme(runner.NewScheme()).Build(), cfg)
	assert.Nil(t, r)
	assert.ErrorContains(t, err, "authorization.platformCallers[0].dataPlane")
}

// The runner's namespace policy is the configuration's: its ownership rule, and every namespace
// the access policies trust reserved.
func TestNewRunnerTakesTheNamespacePolicyFromTheConfig(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(runner.NewScheme()).Build()
	for _, ownership := range []config.NamespaceOwnership{config.OwnershipReferenceOrAnnotation, config.OwnershipReference} {
		cfg := config.Default()
		cfg.Namespaces.Ownership = ownership
		cfg.Namespaces.Reserved = []string{"team-admin"}
		r, err := plugins.NewRunner(c, cfg)
		require.NoError(t, err)
		assert.Equal(t, ownership == config.OwnershipReference, r.Namespaces.RequireOwnerReference, ownership)
		assert.Equal(t, cfg.ReservedNamespaces(), r.Namespaces.Reserved)
		assert.Contains(t, r.Namespaces.Reserved, "team-admin")
		assert.Contains(t, r.Namespaces.Reserved, "kubeflow", "the platform callers' namespace")
	}
}

func TestLoadConfig(t *testing.T) {
	cfg, err := plugins.LoadConfig("")
	require.NoError(t, err)
	assert.Equal(t, plugins.DefaultConfig(), cfg, "no file: the documented defaults")

	path := filepath.Join(t.TempDir(), "plugins.yaml")
	require.NoError(t, os.WriteFile(path, []byte("apiVersion: "+config.APIVersion+"\nkind: "+config.Kind+"\nmesh: {mode: sidecar}\n"), 0o600))
	cfg, err = plugins.LoadConfig(path)
	require.NoError(t, err)
	assert.Equal(t, config.ModeSidecar, cfg.Mesh.Mode)

	require.NoError(t, os.WriteFile(path, []byte("apiVersion: "+config.APIVersion+"\nkind: "+config.Kind+"\nmesh: {mode: sidecars}\n"), 0o600))
	_, err = plugins.LoadConfig(path)
	assert.ErrorContains(t, err, "mesh.mode")
}
