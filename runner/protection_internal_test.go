package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

func TestProtection(t *testing.T) {
	t.Parallel()
	managed := func(name, pluginName string, fields ...metav1.ManagedFieldsEntry) client.Object {
		o := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: fields,
			Labels: map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: pluginName}}}
		o.SetGroupVersionKind(istiosecurityv1.SchemeGroupVersion.WithKind("AuthorizationPolicy"))
		return o
	}
	ref := func(name string) plugin.Ref { return plugin.Ref{GroupKind: ztRef.GroupKind, Name: name} }
	foreign := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}}
	foreign.SetGroupVersionKind(istiosecurityv1.SchemeGroupVersion.WithKind("AuthorizationPolicy"))
	labelledOther := managed("other-value", "x")
	labelledOther.SetLabels(map[string]string{plugin.ManagedByLabel: "kfam"})
	obs := plugin.Observed{Objects: []client.Object{
		managed("intact", "authz"),
		managed("drifted", "authz", fixture.ManagedFields("gitops", metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{"f:action":{}}}`)),
		managed("of-another-plugin", "waypoint"),
		foreign, labelledOther,
	}}
	plans := []*planned{
		{plugin: &testPluginInternal{name: "authz"}, failed: true},
		{plugin: &testPluginInternal{name: "waypoint"}, objects: []applyObject{{ref: ref("wanted"), broken: "does not exist and creating it failed"}}},
	}
	pr := protection(plans, obs)
	assert.Empty(t, pr.gaps([]plugin.Ref{ref("intact")}), "a failed plugin's intact object protects")
	assert.Equal(t, []string{
		"AuthorizationPolicy.security.istio.io/drifted was changed by another writer (gitops set spec.action)",
		"AuthorizationPolicy.security.istio.io/wanted does not exist and creating it failed",
		"AuthorizationPolicy.security.istio.io/of-another-plugin is no longer wanted by plugin waypoint",
		"AuthorizationPolicy.security.istio.io/foreign exists and was made by another writer",
		"AuthorizationPolicy.security.istio.io/other-value exists and was made by kfam",
		"AuthorizationPolicy.security.istio.io/missing does not exist",
	}, pr.gaps([]plugin.Ref{ref("intact"), ref("drifted"), ref("wanted"), ref("of-another-plugin"), ref("foreign"), ref("other-value"), ref("missing")}))
}

// During the object phase an object no phase decided on yet is judged as observed: one of
// another writer does not protect, a missing one does not, an intact one of its plugin does.
func TestProtectionGapsSoFarJudgeUndecidedObjectsAsObserved(t *testing.T) {
	t.Parallel()
	gk := ztRef.GroupKind
	object := func(name string, labels map[string]string) client.Object {
		o := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		o.SetGroupVersionKind(istiosecurityv1.SchemeGroupVersion.WithKind("AuthorizationPolicy"))
		return o
	}
	obs := plugin.Observed{Objects: []client.Object{
		object("intact", map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "waypoint"}),
		object("foreign", nil),
		object("kfam", map[string]string{plugin.ManagedByLabel: "kfam"}),
	}}
	pr := protection([]*planned{{plugin: &testPluginInternal{name: "waypoint"}}}, obs)
	refs := func(names ...string) []plugin.Ref {
		var out []plugin.Ref
		for _, n := range names {
			out = append(out, plugin.Ref{GroupKind: gk, Name: n})
		}
		return out
	}
	assert.Empty(t, pr.gapsSoFar(refs("intact")))
	assert.Equal(t, []string{
		"AuthorizationPolicy.security.istio.io/foreign exists and was made by another writer",
		"AuthorizationPolicy.security.istio.io/kfam exists and was made by kfam",
		"AuthorizationPolicy.security.istio.io/missing does not exist",
	}, pr.gapsSoFar(refs("intact", "foreign", "kfam", "missing")))
}
