package profilev1_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/pss"
)

// FuzzParseProfile: any Profile document either fails or decodes, and then its PodSecurity entry
// either decodes strictly or fails with an error that names the spec.plugins entry.
func FuzzParseProfile(f *testing.F) {
	for _, s := range fixture.Seeds(f, "FuzzParseProfile") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := profilev1.ParseYAML(data)
		if err != nil {
			return
		}
		require.NotEmpty(t, p.Name)
		require.NotEmpty(t, p.Spec.Owner.Name)
		var spec pss.ProfileSpec
		if _, err := profilev1.DecodePluginSpec(p, pss.ProfileKind, &spec); err != nil {
			require.True(t, strings.Contains(err.Error(), "spec.plugins["), "error must name the entry: %v", err)
		}
	})
}
