package runner

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// greedyPlugin wants one ConfigMap more than it observes, so every generation that reads the
// missing one shows another missing.
type greedyPlugin struct{}

func (greedyPlugin) Name() string               { return "greedy" }
func (greedyPlugin) Kinds() []client.ObjectList { return []client.ObjectList{&corev1.ConfigMapList{}} }
func (greedyPlugin) Generate(t plugin.Target) (plugin.Desired, error) {
	var d plugin.Desired
	for i := 0; i <= len(t.Observed.Objects); i++ {
		d.Objects = append(d.Objects, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: fmt.Sprintf("cm-%d", i)}})
	}
	return d, nil
}

// generateGreedy runs generate with an APIReader that holds the ConfigMaps cm-0 to cm-<existing-1>
// and a Reader that shows none of them.
func generateGreedy(t *testing.T, existing int) ([]*planned, error) {
	t.Helper()
	var objs []client.Object
	for i := range existing {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: fmt.Sprintf("cm-%d", i)}})
	}
	c := fake.NewClientBuilder().WithScheme(NewScheme()).WithObjects(objs...).Build()
	r := &Runner{Client: c, APIReader: c, Plugins: []plugin.Plugin{greedyPlugin{}}}
	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: "uid"}}
	res := &Result{Plugins: []PluginResult{{Plugin: "greedy"}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	plans, _, _, err := r.generate(context.Background(), res, profile, ns, plugin.Observed{}, unserved{}, claims{})
	return plans, err
}

// A generation reads what the one before showed missing; the fourth that still finds something
// new is the last, and the call fails rather than generating on.
func TestGenerateStopsAfterMaxGenerations(t *testing.T) {
	t.Parallel()
	plans, err := generateGreedy(t, 3)
	require.NoError(t, err, "the fourth generation reads cm-3, finds none and decides on what it has")
	require.Len(t, plans, 1)
	assert.Len(t, plans[0].objects, maxGenerations)

	_, err = generateGreedy(t, 10)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("after %d generations", maxGenerations))
}
