package pss_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/pss"
)

// Violations checks at the version it is given, as the API server does for an enforce-version
// label: Pod Security's restricted level requires a seccompProfile from v1.19 on only. A version
// it cannot parse is checked at latest, the strictest reading.
func TestViolationsFollowTheVersion(t *testing.T) {
	p, err := pss.New(config.Default())
	require.NoError(t, err)
	noSeccomp := podWith("no-seccomp", func(p *corev1.Pod) { p.Spec.SecurityContext.SeccompProfile = nil })
	pods := []corev1.Pod{noSeccomp}

	assert.Empty(t, p.Violations(pods, config.LevelVersion{Level: "restricted", Version: "v1.18"}))
	for _, v := range []string{"v1.19", "latest", "not-a-version"} {
		got := p.Violations(pods, config.LevelVersion{Level: "restricted", Version: v})
		require.Len(t, got, 1, v)
		assert.Contains(t, got[0], "no-seccomp (", v)
		assert.Contains(t, got[0], "seccompProfile", v)
	}
}
