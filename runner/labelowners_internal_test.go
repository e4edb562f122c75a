package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// shared is a namespace whose labels LabelFieldManager owns (and, with annotated, its
// annotation), plus more managedFields entries.
func shared(labels map[string]string, annotation string, annotated bool, owned []string, more ...metav1.ManagedFieldsEntry) *corev1.Namespace {
	fields := `{"f:metadata":{`
	if annotated {
		fields += `"f:annotations":{"f:` + plugin.LabelOwnersAnnotation + `":{}},`
	}
	fields += `"f:labels":{`
	for i, k := range owned {
		if i > 0 {
			fields += ","
		}
		fields += `"f:` + k + `":{}`
	}
	fields += `}}}`
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: labels,
		ManagedFields: append([]metav1.ManagedFieldsEntry{entry(plugin.LabelFieldManager, metav1.ManagedFieldsOperationApply, "", fields)}, more...)}}
	if annotation != "" {
		ns.Annotations = map[string]string{plugin.LabelOwnersAnnotation: annotation}
	}
	return ns
}

func TestLabelOwners(t *testing.T) {
	labels := map[string]string{"enforce": "baseline", "mode": "on", "team": "ml"}
	owners := `{"mesh":["mode"],"pss":["enforce","team"]}`

	o := readLabelOwners(shared(labels, owners, true, []string{"enforce", "mode"}), nil)
	require.NoError(t, o.err)
	assert.Equal(t, map[string]bool{"enforce": true}, o.owned("pss"), "team is named, but the shared manager does not own it")
	assert.Equal(t, map[string]bool{"mode": true}, o.owned("mesh"))
	assert.Empty(t, o.unattributed)

	// An annotation the shared manager does not own was changed by another writer: it names nobody.
	o = readLabelOwners(shared(labels, owners, false, []string{"enforce", "mode"}), nil)
	assert.Empty(t, o.owned("pss"))
	assert.Equal(t, map[string]bool{"enforce": true, "mode": true}, o.unattributed)
	// ... except a data-plane label, which goes to the plugin that declares it, so it is held
	// while pods depend on it.
	o = readLabelOwners(shared(labels, owners, false, []string{"enforce", "mode"}), []plugin.Plugin{dataPlanePlugin{name: "mesh"}})
	assert.Equal(t, map[string]bool{"mode": true}, o.owned("mesh"))
	assert.Equal(t, map[string]bool{"enforce": true}, o.unattributed)

	// Garbage attributes nothing; it does not fail the call.
	o = readLabelOwners(shared(labels, "{not json", true, []string{"enforce"}), nil)
	require.NoError(t, o.err)
	assert.Equal(t, map[string]bool{"enforce": true}, o.unattributed)

	// A per-plugin manager of an earlier release still owns its labels; an Update under the
	// shared manager's name owns nothing of the runner's.
	legacy := entry(plugin.FieldManager("pss"), metav1.ManagedFieldsOperationApply, "", `{"f:metadata":{"f:labels":{"f:team":{}}}}`)
	impostor := entry(plugin.LabelFieldManager, metav1.ManagedFieldsOperationUpdate, "", `{"f:metadata":{"f:labels":{"f:team":{}}}}`)
	o = readLabelOwners(shared(labels, owners, true, []string{"enforce"}, legacy, impostor), nil)
	assert.Equal(t, map[string]bool{"enforce": true, "team": true}, o.owned("pss"))
	assert.Equal(t, map[string]bool{"team": true}, o.legacy["pss"])
	assert.Equal(t, map[string]bool{"enforce": true}, o.shared)

	broken := entry(plugin.FieldManager("pss"), metav1.ManagedFieldsOperationApply, "", `{`)
	assert.Error(t, readLabelOwners(shared(labels, owners, true, nil, broken), nil).err)
}

// Plugins see their own field manager for the labels the shared manager owns for them.
func TestLabelManagersAttributesSharedLabels(t *testing.T) {
	labels := map[string]string{"enforce": "baseline", "mode": "on", "stray": "x"}
	other := entry("gitops", metav1.ManagedFieldsOperationApply, "", `{"f:metadata":{"f:labels":{"f:enforce":{}}}}`)
	ns := shared(labels, `{"mesh":["mode"],"pss":["enforce","mode"]}`, true, []string{"enforce", "mode", "stray"}, other)
	assert.Equal(t, map[string][]string{
		"enforce": {"gitops", "profile-plugins/pss"},
		"mode":    {"profile-plugins/mesh", "profile-plugins/pss"},
		"stray":   {plugin.LabelFieldManager},
	}, labelManagers(ns))
}

func TestLabelOwnersEncoding(t *testing.T) {
	owners := map[string]map[string]bool{"waypoint": {"b": true, "a": true}, "pss": {"c": true}, "authz": {}}
	got := encodeLabelOwners(owners)
	assert.Equal(t, `{"pss":["c"],"waypoint":["a","b"]}`, got)
	assert.Equal(t, map[string][]string{"pss": {"c"}, "waypoint": {"a", "b"}}, decodeLabelOwners(got))
	assert.Empty(t, encodeLabelOwners(map[string]map[string]bool{"authz": {}}))
	assert.Nil(t, decodeLabelOwners(`["a"]`))
}
