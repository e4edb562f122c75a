package labelowners

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

const apply, update = metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate

// shared is a namespace whose labels owned LabelFieldManager applied (and, with annotated, its
// annotation), plus more managedFields entries.
func shared(labels map[string]string, annotation string, annotated bool, owned []string, more ...metav1.ManagedFieldsEntry) *corev1.Namespace {
	var ann []string
	if annotated {
		ann = append(ann, plugin.LabelOwnersAnnotation)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: labels,
		ManagedFields: append([]metav1.ManagedFieldsEntry{fixture.ManagedFields(plugin.LabelFieldManager, apply, "", fixture.OwnedMetadata(owned, ann...))}, more...)}}
	if annotation != "" {
		ns.Annotations = map[string]string{plugin.LabelOwnersAnnotation: annotation}
	}
	return ns
}

func TestReadBelievesTheAnnotationOnlyForWhatTheSharedManagerOwns(t *testing.T) {
	labels := map[string]string{"enforce": "baseline", "mode": "on", "team": "ml"}
	owners := `{"mesh":["mode"],"pss":["enforce","team"]}`

	l, err := Read(shared(labels, owners, true, []string{"enforce", "mode"}))
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"enforce": true, "mode": true}, l.Shared)
	assert.Equal(t, Owners{"pss": {"enforce": true}, "mesh": {"mode": true}}, l.Named, "team is named, but the shared manager does not own it")
	assert.True(t, l.Annotated)

	// An annotation the shared manager does not own was changed by another writer: it names nobody.
	l, err = Read(shared(labels, owners, false, []string{"enforce", "mode"}))
	require.NoError(t, err)
	assert.Empty(t, l.Named)
	assert.False(t, l.Annotated)
	assert.Equal(t, map[string]bool{"enforce": true, "mode": true}, l.Shared)

	// Garbage attributes nothing; it does not fail the read.
	l, err = Read(shared(labels, "{not json", true, []string{"enforce"}))
	require.NoError(t, err)
	assert.Empty(t, l.Named)
	assert.Equal(t, map[string]bool{"enforce": true}, l.Shared)
}

// A per-plugin manager of an earlier release still owns its labels; an Update under the shared
// manager's name owns nothing of the runner's, and a broken entry of the runner's fails the read.
func TestReadTellsLegacyManagersFromImpostors(t *testing.T) {
	labels := map[string]string{"enforce": "baseline", "team": "ml"}
	owners := `{"pss":["enforce"]}`
	legacy := fixture.ManagedFields(plugin.FieldManager("pss"), apply, "", fixture.OwnedMetadata([]string{"team"}))
	impostor := fixture.ManagedFields(plugin.LabelFieldManager, update, "", fixture.OwnedMetadata([]string{"team"}))
	status := fixture.ManagedFields(plugin.LabelFieldManager, apply, "status", fixture.OwnedMetadata([]string{"team"}))
	l, err := Read(shared(labels, owners, true, []string{"enforce"}, legacy, impostor, status))
	require.NoError(t, err)
	assert.Equal(t, Owners{"pss": {"team": true}}, l.Legacy)
	assert.Equal(t, Owners{"pss": {"enforce": true}}, l.Named)
	assert.Equal(t, map[string]bool{"enforce": true}, l.Shared)

	broken := fixture.ManagedFields(plugin.FieldManager("pss"), apply, "", `{`)
	_, err = Read(shared(labels, owners, true, nil, broken))
	assert.Error(t, err)
	_, err = Read(shared(labels, owners, true, nil, fixture.ManagedFields("gitops", apply, "", `{`)))
	assert.NoError(t, err, "another writer's entry is none of the runner's business")
}

// Plugins see their own field manager for the labels the shared manager owns for them.
func TestManagersAttributesSharedLabels(t *testing.T) {
	labels := map[string]string{"enforce": "baseline", "mode": "on", "stray": "x"}
	other := fixture.ManagedFields("gitops", apply, "", fixture.OwnedMetadata([]string{"enforce"}))
	ns := shared(labels, `{"mesh":["mode"],"pss":["enforce","mode"]}`, true, []string{"enforce", "mode", "stray"}, other)
	assert.Equal(t, map[string][]string{
		"enforce": {"gitops", "profile-plugins/pss"},
		"mode":    {"profile-plugins/mesh", "profile-plugins/pss"},
		"stray":   {plugin.LabelFieldManager},
	}, Managers(ns))

	// Without a readable ledger, the shared manager is reported as itself.
	broken := fixture.ManagedFields(plugin.FieldManager("pss"), apply, "", `{`)
	ns = shared(labels, `{"mesh":["mode"]}`, true, []string{"mode"}, broken)
	assert.Equal(t, map[string][]string{"mode": {plugin.LabelFieldManager}}, Managers(ns))
}

func TestEncodeSortsAndDecodeReadsBack(t *testing.T) {
	owners := Owners{"waypoint": {"b": true, "a": true}, "pss": {"c": true}, "authz": {}}
	got := Encode(owners)
	assert.Equal(t, `{"pss":["c"],"waypoint":["a","b"]}`, got)
	assert.Equal(t, map[string][]string{"pss": {"c"}, "waypoint": {"a", "b"}}, decode(got))
	assert.Empty(t, Encode(Owners{"authz": {}}))
	assert.Nil(t, decode(`["a"]`))
	assert.Nil(t, decode(""))
}
