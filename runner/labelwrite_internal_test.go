package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	psaapi "k8s.io/pod-security-admission/api"
)

// PodSecurity's warnings on a namespace update (existing pods violate the new enforce level) go
// to the plugin that changed the enforce level, not to every plugin the shared write carries.
func TestWarningsOfTheLabelWrite(t *testing.T) {
	t.Parallel()
	mesh := &planned{plugin: &testPluginInternal{name: "mesh"}}
	pss := &planned{plugin: &testPluginInternal{name: "pss"}}
	w := labelWrite{set: map[string][]string{"mesh": {"istio.io/dataplane-mode"}, "pss": {psaapi.EnforceLevelLabel, psaapi.AuditLevelLabel}}}
	assert.Equal(t, []*planned{pss}, w.warned([]*planned{mesh, pss}))

	w = labelWrite{set: map[string][]string{"mesh": {"istio.io/dataplane-mode"}, "pss": {psaapi.AuditLevelLabel}},
		removed: map[string][]string{"mesh": {psaapi.EnforceVersionLabel}}}
	assert.Equal(t, []*planned{mesh}, w.warned([]*planned{mesh, pss}))

	w = labelWrite{set: map[string][]string{"mesh": {"istio.io/dataplane-mode"}, "pss": {psaapi.AuditLevelLabel}}}
	assert.Equal(t, []*planned{mesh, pss}, w.warned([]*planned{mesh, pss}), "any other warning: every plugin the write changes")
}
