package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// dataPlanePlugin captures the pods it is given, except those named "free".
type dataPlanePlugin struct{ name string }

func (p dataPlanePlugin) Name() string                                 { return p.name }
func (dataPlanePlugin) Kinds() []client.ObjectList                     { return nil }
func (dataPlanePlugin) Generate(plugin.Target) (plugin.Desired, error) { return plugin.Desired{}, nil }

func (dataPlanePlugin) DataPlaneLabels() map[string][]plugin.Ref {
	return map[string][]plugin.Ref{"mode": {ztRef}}
}

func (dataPlanePlugin) Captured(key, value string, pods []corev1.Pod) []string {
	if key != "mode" || value != "on" {
		return nil
	}
	var out []string
	for _, p := range pods {
		if p.Name != "free" {
			out = append(out, p.Name)
		}
	}
	return out
}

var ztRef = plugin.Ref{GroupKind: schema.GroupKind{Group: "security.istio.io", Kind: "AuthorizationPolicy"}, Name: "zt"}

// testPluginInternal is a plugin that wants nothing.
type testPluginInternal struct{ name string }

func (p *testPluginInternal) Name() string             { return p.name }
func (*testPluginInternal) Kinds() []client.ObjectList { return nil }
func (*testPluginInternal) Generate(plugin.Target) (plugin.Desired, error) {
	return plugin.Desired{}, nil
}

// labelled is a namespace whose labels owned the named field manager applied.
func labelled(labels map[string]string, manager string, owned ...string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: labels,
		ManagedFields: []metav1.ManagedFieldsEntry{fixture.ManagedFields(manager, metav1.ManagedFieldsOperationApply, "", fixture.OwnedMetadata(owned))}}}
}

func pods(names ...string) []corev1.Pod {
	var out []corev1.Pod
	for _, n := range names {
		out = append(out, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	return out
}

func TestHoldDataPlane(t *testing.T) {
	t.Parallel()
	dp := dataPlanePlugin{name: "mesh"}
	mine := plugin.FieldManager("mesh")
	plain := &testPluginInternal{name: "other"}

	h := holdDataPlane([]plugin.Plugin{plain, dp}, labelled(map[string]string{"mode": "on"}, mine, "mode"), plugin.Observed{Pods: pods("b", "a", "free")})
	assert.True(t, h.holds("mesh", "mode"))
	assert.Equal(t, map[string]string{"mode": "on"}, h.labelsOf("mesh"))
	assert.Equal(t, map[plugin.Ref]bool{ztRef: true}, h.refs)
	assert.Equal(t, map[string]string{"mode": "on"}, h.all())
	assert.Equal(t, map[string]string{}, holds{}.all())
	assert.Equal(t, []string{"keeps mode=on and the objects it requires until no pod depends on it (restart the pods into the new data plane or delete them); 2 running pod(s) would otherwise be outside every data plane: a, b"}, h.waiting("mesh"))
	assert.Empty(t, h.waiting("other"))
	assert.Equal(t, map[string]string{}, h.labelsOf("other"), "never nil: an empty set removes every label")

	for name, ns := range map[string]*corev1.Namespace{
		"another writer's label":        labelled(map[string]string{"mode": "on"}, "someone", "mode"),
		"owned but absent":              labelled(map[string]string{}, mine, "mode"),
		"a value that captures nothing": labelled(map[string]string{"mode": "off"}, mine, "mode"),
	} {
		h := holdDataPlane([]plugin.Plugin{dp}, ns, plugin.Observed{Pods: pods("a")})
		assert.False(t, h.holds("mesh", "mode"), name)
		assert.Empty(t, h.refs, name)
	}
	h = holdDataPlane([]plugin.Plugin{dp}, labelled(map[string]string{"mode": "on"}, mine, "mode"), plugin.Observed{Pods: pods("free")})
	assert.False(t, h.holds("mesh", "mode"), "no captured pod")
	h = holdDataPlane([]plugin.Plugin{dp}, labelled(map[string]string{"mode": "on"}, mine, "mode"), plugin.Observed{})
	assert.False(t, h.holds("mesh", "mode"), "no pod at all")
}

// protectorPlugin says the pods in its map depend on the objects they key.
type protectorPlugin struct {
	*testPluginInternal
	protected map[plugin.Ref][]string
}

func (p protectorPlugin) ProtectedPods(plugin.Observed) map[plugin.Ref][]string { return p.protected }

// An object holds only while at least one pod depends on it: a PodProtector's entry with no pod
// names holds nothing, and one pod is enough.
func TestHoldDataPlaneHoldsAProtectedObjectOnlyWithAPod(t *testing.T) {
	t.Parallel()
	empty := plugin.Ref{GroupKind: ztRef.GroupKind, Name: "empty"}
	one := plugin.Ref{GroupKind: ztRef.GroupKind, Name: "one"}
	p := protectorPlugin{testPluginInternal: &testPluginInternal{name: "authz"},
		protected: map[plugin.Ref][]string{empty: {}, one: {"b"}}}

	h := holdDataPlane([]plugin.Plugin{p}, labelled(nil, "someone"), plugin.Observed{})
	assert.Equal(t, map[plugin.Ref]bool{one: true}, h.refs)
	assert.Equal(t, map[plugin.Ref][]string{one: {"b"}}, h.protected)
}
