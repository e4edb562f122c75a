package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

// FuzzParseConfig: any document either fails with an error or yields a valid configuration that
// survives a round trip unchanged. Nothing panics.
func FuzzParseConfig(f *testing.F) {
	for _, s := range fixture.Seeds(f, "FuzzParseConfig") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse(data)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.NoError(t, c.Validate())
		again, err := yaml.Marshal(c)
		require.NoError(t, err)
		c2, err := config.Parse(again)
		require.NoError(t, err, "a parsed configuration must parse again:\n%s", again)
		require.Equal(t, c, c2)
	})
}
