package v1alpha1_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

func TestProvisionDefaultsKeepAnUpgradeAsItWas(t *testing.T) {
	c := config.Default()
	assert.Equal(t, config.ProvisionAlways, c.Mesh.Waypoint.Provision, "an upgrade must not start tearing waypoints down by itself")
	assert.Equal(t, 30*time.Minute, c.Mesh.Waypoint.IdleAfter.Duration)
	assert.Nil(t, c.Mesh.Waypoint.IgnoredServices)
	assert.False(t, c.Mesh.OnDemand())
	assert.False(t, c.Mesh.Waypoint.IgnoredServicesSelector().Matches(labels.Set{"app": "notebook"}), "no selector ignores no Service")
}

func TestProvisionOnDemandParses(t *testing.T) {
	c, err := config.Parse([]byte(header + `
mesh:
  waypoint:
    provision: onDemand
    idleAfter: 2h
    ignoredServices: {matchLabels: {app: ml-pipeline-visualizationserver}}
`))
	require.NoError(t, err)
	assert.True(t, c.Mesh.OnDemand())
	assert.Equal(t, 2*time.Hour, c.Mesh.Waypoint.IdleAfterDuration())
	sel := c.Mesh.Waypoint.IgnoredServicesSelector()
	assert.True(t, sel.Matches(labels.Set{"app": "ml-pipeline-visualizationserver"}))
	assert.False(t, sel.Matches(labels.Set{"app": "notebook"}))
	assert.Empty(t, c.Warnings())
}

func TestProvisionOnDemandIsOnlyAmbient(t *testing.T) {
	c, err := config.Parse([]byte(header + "mesh: {mode: sidecar, waypoint: {provision: onDemand}}\n"))
	require.NoError(t, err)
	assert.False(t, c.Mesh.OnDemand(), "sidecar mode has no waypoint")
	require.Len(t, c.Warnings(), 1)
	assert.Contains(t, c.Warnings()[0], "mesh.waypoint.provision: onDemand has no effect in mesh.mode sidecar")
}

func TestProvisionShortIdleAfterWarns(t *testing.T) {
	c, err := config.Parse([]byte(header + "mesh: {waypoint: {provision: onDemand, idleAfter: 20s}}\n"))
	require.NoError(t, err)
	require.Len(t, c.Warnings(), 1)
	assert.Contains(t, c.Warnings()[0], "mesh.waypoint.idleAfter: 20s is shorter than 1m0s")
}

func TestProvisionValidationNamesTheField(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"unknown provision": {"mesh: {waypoint: {provision: lazy}}", `mesh.waypoint.provision: Unsupported value: "lazy"`},
		"zero idleAfter":    {"mesh: {waypoint: {idleAfter: 0s}}", `mesh.waypoint.idleAfter: Invalid value: "0s": must be positive`},
		"negative":          {"mesh: {waypoint: {idleAfter: -5m}}", `mesh.waypoint.idleAfter: Invalid value: "-5m0s"`},
		"empty selector":    {"mesh: {waypoint: {ignoredServices: {}}}", "mesh.waypoint.ignoredServices: Invalid value: \"&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}\": an empty selector matches every Service"},
		"bad selector": {"mesh: {waypoint: {ignoredServices: {matchExpressions: [{key: app, operator: Sometimes}]}}}",
			`mesh.waypoint.ignoredServices: Invalid value:`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.Parse([]byte(header + tc.doc + "\n"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
