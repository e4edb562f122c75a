package runner_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// An editor who applies under the plugin's field manager and sets another desired-hash made the
// change look like an earlier body of the plugin's: the fields were restored, but routing stayed
// through the restoring write. The hash is now checked against what the plugin's Apply entry
// holds (ssa.AppliedBody); a forged one is drift like any other: routing comes off first, the
// object is restored, the change is reported, and the namespace is routed again on the next call.
func TestAForgedDesiredHashIsDrift(t *testing.T) {
	t.Parallel()
	for name, tc := range impersonations() {
		t.Run(name, func(t *testing.T) {
			m := newMesh(t)
			m.enrol()
			impersonatedApply(t, m.c, tc.object(m), tc.plugin, func(u map[string]any) {
				tc.change(u)
				md := u["metadata"].(map[string]any)
				ann, _ := md["annotations"].(map[string]any)
				if ann == nil {
					ann = map[string]any{}
					md["annotations"] = ann
				}
				ann[plugin.DesiredHashAnnotation] = "0123456789abcdef"
			})
			routed := m.routedAtWrites(describe(tc.object(m)))
			m.writes = nil

			res := m.apply()
			require.NoError(t, res.Err())
			assert.True(t, tc.gone(m), "the forged change stays")
			assert.Empty(t, *routed, "routed while the forged change was restored: %v", m.writes)
			restoredNotRouted(t, m.labels())
			assert.Contains(t, strings.Join(res.Warnings(), "\n"), "was changed by a writer using the plugin's own field manager")

			m.fail = nil
			if tc.plugin == waypoint.PluginName {
				m.countGeneration()
				m.program()
			}
			require.NoError(t, m.apply().Err())
			enrolled(t, m.labels())
		})
	}
}
