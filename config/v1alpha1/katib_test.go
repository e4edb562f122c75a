package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

func TestKatibRuleDefaultsToTrueAndCanBeDropped(t *testing.T) {
	def := config.Default()
	require.NotNil(t, def.Authorization.KatibRule)
	assert.True(t, *def.Authorization.KatibRule)

	c, err := config.Parse([]byte("apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\nauthorization:\n  katibRule: false\n"))
	require.NoError(t, err)
	require.NotNil(t, c.Authorization.KatibRule)
	assert.False(t, *c.Authorization.KatibRule)
}
