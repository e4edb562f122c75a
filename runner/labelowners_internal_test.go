package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// A shared label the annotation names nobody for goes to the data-plane plugin that declares it,
// so a lost annotation never lets a data-plane label go while pods depend on it; any other such
// label is unattributed, and the next write releases it.
func TestLabelOwnersGiveUnnamedDataPlaneLabelsToTheirPlugin(t *testing.T) {
	t.Parallel()
	ns := labelled(map[string]string{"enforce": "baseline", "mode": "on"}, plugin.LabelFieldManager, "enforce", "mode")

	o := readLabelOwners(ns, nil)
	require.NoError(t, o.err)
	assert.Empty(t, o.owned("mesh"))
	assert.Equal(t, map[string]bool{"enforce": true, "mode": true}, o.unattributed)

	o = readLabelOwners(ns, []plugin.Plugin{dataPlanePlugin{name: "mesh"}, &testPluginInternal{name: "pss"}})
	assert.Equal(t, map[string]bool{"mode": true}, o.owned("mesh"))
	assert.Empty(t, o.owned("pss"))
	assert.Equal(t, map[string]bool{"enforce": true}, o.unattributed)

	// A key the annotation names is the named plugin's, data-plane or not.
	ns.Annotations = map[string]string{plugin.LabelOwnersAnnotation: `{"pss":["mode"]}`}
	ns.ManagedFields[0] = fixture.ManagedFields(plugin.LabelFieldManager, metav1.ManagedFieldsOperationApply, "", fixture.OwnedMetadata([]string{"enforce", "mode"}, plugin.LabelOwnersAnnotation))
	o = readLabelOwners(ns, []plugin.Plugin{dataPlanePlugin{name: "mesh"}})
	assert.Equal(t, map[string]bool{"mode": true}, o.owned("pss"))
	assert.Empty(t, o.owned("mesh"))
}

// owned joins what the shared manager owns for the plugin with what its own field manager still
// owns from an earlier release; a ledger that cannot be read owns nothing.
func TestLabelOwnersOwnedJoinsSharedAndLegacyKeys(t *testing.T) {
	t.Parallel()
	ns := labelled(map[string]string{"mode": "on", "team": "ml"}, plugin.LabelFieldManager, "mode")
	ns.ManagedFields = append(ns.ManagedFields, fixture.ManagedFields(plugin.FieldManager("mesh"), metav1.ManagedFieldsOperationApply, "", fixture.OwnedMetadata([]string{"team"})))
	o := readLabelOwners(ns, []plugin.Plugin{dataPlanePlugin{name: "mesh"}})
	assert.Equal(t, map[string]bool{"mode": true, "team": true}, o.owned("mesh"))

	ns.ManagedFields = append(ns.ManagedFields, fixture.ManagedFields(plugin.FieldManager("pss"), metav1.ManagedFieldsOperationApply, "", `{`))
	o = readLabelOwners(ns, []plugin.Plugin{dataPlanePlugin{name: "mesh"}})
	assert.Error(t, o.err)
	assert.Empty(t, o.owned("mesh"))
}
