package pss_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/pss"
)

// When several overrides match a namespace, the loosest of them bounds what its Profile may ask
// for, whatever their order; an override whose selector does not match grants nothing.
func TestTheLoosestMatchingOverrideBoundsTheProfile(t *testing.T) {
	const overrides = `  - namespaceSelector: {matchLabels: {example.com/team: ml}}
    minimumEnforce: baseline
  - namespaceSelector: {matchLabels: {example.com/tier: gpu}}
    minimumEnforce: privileged
`
	reversed := `  - namespaceSelector: {matchLabels: {example.com/tier: gpu}}
    minimumEnforce: privileged
  - namespaceSelector: {matchLabels: {example.com/team: ml}}
    minimumEnforce: baseline
`
	both := map[string]string{"example.com/team": "ml", "example.com/tier": "gpu"}
	team := map[string]string{"example.com/team": "ml"}
	cases := []struct {
		name, overrides, asked string
		labels                 map[string]string
		want                   string
		refused                string // part of the one error; empty for none
	}{
		{"both match: privileged", overrides, "privileged", both, "privileged", ""},
		{"both match, other order: privileged", reversed, "privileged", both, "privileged", ""},
		{"both match: baseline", overrides, "baseline", both, "baseline", ""},
		{"only the stricter matches", overrides, "privileged", team, "restricted", `down to "baseline" only`},
		{"only the stricter matches, other order", reversed, "privileged", team, "restricted", `down to "baseline" only`},
		{"only the stricter matches: its level", reversed, "baseline", team, "baseline", ""},
		{"none matches", overrides, "baseline", map[string]string{"example.com/team": "web"}, "restricted", "no podSecurity.overrides entry matches"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pss.New(fixture.Config(t, "podSecurity:\n  enforce: {level: restricted}\n  overrides:\n"+tc.overrides))
			require.NoError(t, err)
			d, err := p.Generate(plugin.Target{Namespace: ns, Profile: profileAsking(t, ns, "{enforce: "+tc.asked+"}"),
				Observed: plugin.Observed{Labels: tc.labels}})
			require.NoError(t, err)
			assert.Equal(t, tc.want, d.Labels[psaapi.EnforceLevelLabel])
			if tc.refused == "" {
				assert.Empty(t, d.Errors)
				return
			}
			require.Len(t, d.Errors, 1)
			assert.Contains(t, d.Errors[0].Error(), tc.refused)
			assert.Contains(t, d.Errors[0].Error(), "spec.plugins[1].spec.enforce")
		})
	}
}
