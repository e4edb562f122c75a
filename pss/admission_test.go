package pss_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	psaapi "k8s.io/pod-security-admission/api"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/pss"
)

// Revoke keeps every label the plugin sets: dropping only a version would move the
// check to latest, and dropping enforce admits privileged pods.
func TestAdmissionLabelsAreEveryLabelThePluginSets(t *testing.T) {
	p, err := pss.New(config.Default())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{
		psaapi.EnforceLevelLabel, psaapi.EnforceVersionLabel, psaapi.AuditLevelLabel, psaapi.AuditVersionLabel,
		psaapi.WarnLevelLabel, psaapi.WarnVersionLabel,
	}, p.AdmissionLabels())
}
