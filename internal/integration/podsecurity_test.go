package integration

// Pod Security settings on the real API server.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
)

// An override selector that matches every namespace the admin did not label is refused (review
// "Second review", finding 3, docs/security/reviews.md; low, careless admin). validateMatch refuses
// selectors on labels that follow the Profile, but accepts a negative selector on the admin's own
// label: NotIn or DoesNotExist match every namespace the admin has not labelled, which is every
// namespace a user registers from now on. The same hand-out of privileged to anyone who registers
// that the refusal of profiles: ["*"] and of kubernetes.io/metadata.name is there to prevent.
func TestNegativeOverrideSelectorRefused(t *testing.T) {
	t.Parallel()
	body := `  overrides:
  - namespaceSelector: {matchExpressions: [{key: example.com/tier, operator: DoesNotExist}]}
    minimumEnforce: privileged
`
	// Parsed as the controller loads it (config.Parse validates), not through fixture.Config,
	// which fails the test on a refused configuration.
	cfg, err := config.Parse([]byte("apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\nmesh: {mode: none}\npodSecurity:\n" + body))
	if err == nil {
		err = cfg.Validate()
	}
	if err == nil {
		// Show what it means: a Profile anyone registers gets privileged.
		env := envtest.Start(t)
		c := env.Client
		r, rerr := profileplugins.NewRunner(c, cfg)
		require.NoError(t, rerr)
		p := profileIn(t, c, "attack-new-user")
		askEnforce(t, c, p, "privileged")
		converged(t, r, p)
		t.Logf("a freshly registered Profile's enforce: %q", namespaceLabels(t, c, "attack-new-user")["pod-security.kubernetes.io/enforce"])
	}
	assert.Error(t, err, "an override whose selector matches every namespace the admin did not label validates")
}
