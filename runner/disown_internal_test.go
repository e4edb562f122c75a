package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// disown is the one decision of whose an object is: the managed labels claim it, the Profile as
// its controller proves it. Each case says what the object looks like and whether it is the
// plugins' own.
func TestDisownKeepsOnlyWhatTheProfileControls(t *testing.T) {
	t.Parallel()
	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "alice", UID: "uid-now"}}
	managed := map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "waypoint", "team": "ml"}
	ref := func(apiVersion, kind, name, uid string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + uid), Controller: &controller}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		owners []metav1.OwnerReference
		// claimed: the object carries the labels but is not the plugins'; why is part of the reason.
		claimed bool
		why     string
	}{
		{name: "labels and the Profile as controller: the plugins' own", labels: managed,
			owners: []metav1.OwnerReference{ref("kubeflow.org/v1", "Profile", "alice", "now", true)}},
		{name: "any version of the Profile's group proves it", labels: managed,
			owners: []metav1.OwnerReference{ref("kubeflow.org/v1beta1", "Profile", "alice", "now", true)}},
		{name: "no owner reference: copied labels", labels: managed, claimed: true, why: "it has no controller owner reference"},
		{name: "the Profile as an owner that is not the controller", labels: managed, claimed: true, why: "no controller",
			owners: []metav1.OwnerReference{ref("kubeflow.org/v1", "Profile", "alice", "now", false)}},
		{name: "another object as controller", labels: managed, claimed: true, why: `its controller is Deployment "editor" (uid uid-x)`,
			owners: []metav1.OwnerReference{ref("apps/v1", "Deployment", "editor", "x", true)}},
		{name: "an earlier Profile of the same name", labels: managed, claimed: true, why: `an earlier Profile "alice" (uid uid-old)`,
			owners: []metav1.OwnerReference{ref("kubeflow.org/v1", "Profile", "alice", "old", true)}},
		{name: "another Profile", labels: managed, claimed: true, why: `its controller is Profile "bob"`,
			owners: []metav1.OwnerReference{ref("kubeflow.org/v1", "Profile", "bob", "bob", true)}},
		{name: "the Profile's UID on a kind of another group", labels: managed, claimed: true, why: "its controller is Profile",
			owners: []metav1.OwnerReference{ref("example.com/v1", "Profile", "alice", "now", true)}},
		{name: "the Profile's UID on another kind", labels: managed, claimed: true, why: "its controller is Namespace",
			owners: []metav1.OwnerReference{ref("kubeflow.org/v1", "Namespace", "alice", "now", true)}},
		{name: "no managed labels: another writer's, and claims nothing", labels: map[string]string{"team": "ml"}},
		{name: "another managed-by value claims nothing", labels: map[string]string{plugin.ManagedByLabel: "kfam", plugin.PluginLabel: "waypoint"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "alice", Labels: c.labels, OwnerReferences: c.owners}}
			obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			before := obj.DeepCopy()
			cl := claims{}
			out := disown(profile, []client.Object{obj}, cl)
			require.Len(t, out, 1)
			assert.Equal(t, before, obj, "the observed object is never changed in place")
			if !c.claimed {
				assert.Same(t, obj, out[0], "an object that claims nothing false is shown as it is")
				assert.Empty(t, cl)
				return
			}
			got := cl[plugin.Ref{GroupKind: obj.GroupVersionKind().GroupKind(), Name: "cm"}]
			assert.Equal(t, "profile-plugins plugin waypoint", got.labels)
			assert.Equal(t, "waypoint", got.plugin)
			assert.Contains(t, got.why, c.why)
			assert.Equal(t, map[string]string{"team": "ml"}, out[0].GetLabels(), "shown without the managed labels, with every other")
			assert.False(t, plugin.IsManagedBy(out[0].GetLabels(), "waypoint"))
		})
	}
}

// A Profile read without a UID controls nothing: Apply refuses it before, and an object whose
// controller has an empty UID must not match it.
func TestAProfileWithoutAUIDControlsNothing(t *testing.T) {
	t.Parallel()
	controller := true
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "alice", Controller: &controller}}}}
	assert.False(t, controls(&profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "alice"}}, obj))
}
