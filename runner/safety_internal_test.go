package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

func entry(manager string, op metav1.ManagedFieldsOperationType, sub, fields string) metav1.ManagedFieldsEntry {
	e := metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: sub}
	if fields != "" {
		e.FieldsV1 = metav1.NewFieldsV1(fields)
	}
	return e
}

func withFields(entries ...metav1.ManagedFieldsEntry) *istiosecurityv1.AuthorizationPolicy {
	return &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: entries}}
}

func TestForeignSpecFields(t *testing.T) {
	const mine = "profile-plugins/authz"
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	cases := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    map[string][]string
	}{
		{"only ours", []metav1.ManagedFieldsEntry{entry(mine, apply, "", `{"f:spec":{"f:action":{},"f:rules":{}}}`)}, map[string][]string{}},
		{"shared with another writer", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:action":{},"f:rules":{}}}`),
			entry("kfam", update, "", `{"f:spec":{"f:rules":{}}}`),
		}, map[string][]string{}},
		{"another writer took a field", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:rules":{}}}`),
			entry("kubectl-edit", update, "", `{"f:spec":{"f:action":{}}}`),
		}, map[string][]string{"kubectl-edit": {"spec.action"}}},
		{"another writer added fields", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:action":{},"f:rules":{}}}`),
			entry("gitops", apply, "", `{"f:spec":{"f:selector":{".":{},"f:matchLabels":{"f:app":{}}},"f:targetRefs":{}}}`),
		}, map[string][]string{"gitops": {"spec.selector", "spec.selector.matchLabels.app", "spec.targetRefs"}}},
		// After an adoption, the previous writer's entry keeps a bare spec node that owns nothing.
		{"a bare spec node owns no field", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:action":{},"f:rules":{}}}`),
			entry("kfam", update, "", `{"f:metadata":{"f:annotations":{"f:user":{}}},"f:spec":{}}`),
		}, map[string][]string{}},
		{"our own update shared with our apply", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:action":{},"f:rules":{}}}`),
			entry(mine, update, "", `{"f:spec":{"f:action":{}}}`),
		}, map[string][]string{}},
		{"a field only our own update holds is not removed by apply", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:rules":{}}}`),
			entry(mine, update, "", `{"f:spec":{"f:targetRefs":{}}}`),
		}, map[string][]string{mine: {"spec.targetRefs"}}},
		{"status writers are not drift", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:rules":{}}}`),
			entry("istiod", update, "status", `{"f:status":{"f:conditions":{}}}`),
			entry("istiod", apply, "status", `{"f:spec":{"f:x":{}}}`),
		}, map[string][]string{}},
		{"status writers are not drift next to another writer either", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:rules":{}}}`),
			entry("kfam", update, "", `{"f:spec":{"f:rules":{}}}`),
			entry("istiod", apply, "status", `{"f:spec":{"f:x":{}}}`),
		}, map[string][]string{}},
		{"metadata only, unreadable or empty entries", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:rules":{}}}`),
			entry("labeller", update, "", `{"f:metadata":{"f:labels":{"f:x":{}}}}`),
			entry("broken", update, "", `{not json`),
			entry("nothing", update, "", ""),
		}, map[string][]string{}},
		// Objects the plugin has not applied (yet): a same-named object of another writer, and one
		// that only the plugin's restoring Update wrote.
		{"only another writer's apply", []metav1.ManagedFieldsEntry{
			entry("gitops", apply, "", `{"f:spec":{"f:action":{}}}`),
		}, map[string][]string{"gitops": {"spec.action"}}},
		{"only our own update", []metav1.ManagedFieldsEntry{
			entry(mine, update, "", `{"f:spec":{"f:targetRefs":{}}}`),
		}, map[string][]string{mine: {"spec.targetRefs"}}},
		{"keyed list items", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:listeners":{"k:{\"name\":\"mesh\"}":{".":{},"f:port":{}}}}}`),
			entry("kubectl-edit", update, "", `{"f:spec":{"f:listeners":{"k:{\"name\":\"open\"}":{".":{},"f:port":{}}}}}`),
		}, map[string][]string{"kubectl-edit": {`spec.listeners[{"name":"open"}]`, `spec.listeners[{"name":"open"}].port`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, foreignSpecFields(withFields(tc.entries...), "authz"))
		})
	}
}

func TestFieldPaths(t *testing.T) {
	out := map[string]bool{}
	fieldPaths("spec", map[string]any{
		"f:a":                map[string]any{},
		"k:{\"name\":\"x\"}": map[string]any{".": map[string]any{}, "f:b": map[string]any{}},
		"v:\"y\"":            map[string]any{},
		"i:0":                map[string]any{},
		"other":              map[string]any{},
	}, out)
	assert.Equal(t, map[string]bool{
		"spec.a": true, `spec[{"name":"x"}]`: true, `spec[{"name":"x"}].b`: true, `spec["y"]`: true, "spec[0]": true, "specother": true,
	}, out)
}

func TestDescribeForeign(t *testing.T) {
	assert.Equal(t, "an unnamed field manager set spec.x; gitops set spec.a, spec.b",
		describeForeign(map[string][]string{"gitops": {"spec.a", "spec.b"}, "": {"spec.x"}}))
}

func TestRestoredBody(t *testing.T) {
	cur := &istiosecurityv1.AuthorizationPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "security.istio.io/v1", Kind: "AuthorizationPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "z", Namespace: "ns", ResourceVersion: "42", UID: "u1",
			Labels:          map[string]string{"theirs": "1", plugin.ManagedByLabel: "old"},
			Annotations:     map[string]string{"note": "x"},
			Finalizers:      []string{"their/finalizer"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Thing", Name: "t", UID: "other"}, {APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "ns", UID: "p1"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{entry("gitops", metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{"f:selector":{}}}`)},
		},
		Spec: securityv1beta1.AuthorizationPolicy{Action: securityv1beta1.AuthorizationPolicy_AUDIT, Selector: nil},
	}
	desired := map[string]any{
		"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
		"metadata": map[string]any{
			"name": "z", "namespace": "ns",
			"labels":          map[string]any{plugin.ManagedByLabel: plugin.ManagedByValue},
			"annotations":     map[string]any{plugin.DesiredHashAnnotation: "h"},
			"ownerReferences": []any{map[string]any{"apiVersion": "kubeflow.org/v1", "kind": "Profile", "name": "ns", "uid": "p1", "controller": true}},
		},
		"spec": map[string]any{"action": "ALLOW", "rules": []any{map[string]any{}}},
	}
	u, err := restoredBody(cur, desired)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"action": "ALLOW", "rules": []any{map[string]any{}}}, u.Object["spec"])
	assert.Equal(t, "42", u.GetResourceVersion(), "the precondition")
	assert.Equal(t, map[string]string{"theirs": "1", plugin.ManagedByLabel: plugin.ManagedByValue}, u.GetLabels())
	assert.Equal(t, map[string]string{"note": "x", plugin.DesiredHashAnnotation: "h"}, u.GetAnnotations())
	assert.Equal(t, []string{"their/finalizer"}, u.GetFinalizers())
	assert.Len(t, u.GetOwnerReferences(), 2, "ours is not added twice")
	assert.Empty(t, u.GetManagedFields(), "left out, so the server keeps and updates them")

	// A desired object without a spec (a ConfigMap) drops the observed one; a missing owner is added.
	desired["spec"] = nil
	delete(desired, "spec")
	cur.OwnerReferences = nil
	cur.Labels, cur.Annotations = nil, nil
	u, err = restoredBody(cur, desired)
	require.NoError(t, err)
	assert.NotContains(t, u.Object, "spec")
	assert.Len(t, u.GetOwnerReferences(), 1)
	assert.Equal(t, map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue}, u.GetLabels())

	// Another writer's owner is kept, and ours is added next to it.
	cur.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Thing", Name: "t", UID: "other"}}
	u, err = restoredBody(cur, desired)
	require.NoError(t, err)
	var uids []types.UID
	for _, o := range u.GetOwnerReferences() {
		uids = append(uids, o.UID)
	}
	assert.Equal(t, []types.UID{"other", "p1"}, uids)
}

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

// labelled is a namespace whose labels the named field manager owns through apply.
func labelled(labels map[string]string, manager string, owned ...string) *corev1.Namespace {
	fields := `{"f:metadata":{"f:labels":{`
	for i, k := range owned {
		if i > 0 {
			fields += ","
		}
		fields += `"f:` + k + `":{}`
	}
	fields += `}}}`
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: labels,
		ManagedFields: []metav1.ManagedFieldsEntry{entry(manager, metav1.ManagedFieldsOperationApply, "", fields)}}}
}

func pods(names ...string) []corev1.Pod {
	var out []corev1.Pod
	for _, n := range names {
		out = append(out, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	return out
}

func TestHoldDataPlane(t *testing.T) {
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

type testPluginInternal struct{ name string }

func (p *testPluginInternal) Name() string             { return p.name }
func (*testPluginInternal) Kinds() []client.ObjectList { return nil }
func (*testPluginInternal) Generate(plugin.Target) (plugin.Desired, error) {
	return plugin.Desired{}, nil
}

func TestDecideLabels(t *testing.T) {
	owner := plugin.Ref{GroupKind: ztRef.GroupKind, Name: "owner"}
	newPlan := func() *planned {
		return &planned{plugin: dataPlanePlugin{name: "mesh"}, res: &PluginResult{}, desired: plugin.Desired{
			Labels:        map[string]string{"mode": "on", "route": "wp", "free": "x"},
			LabelRequires: map[string][]plugin.Ref{"mode": {ztRef}, "route": {owner, ztRef}, "unwanted": {ztRef}},
		}}
	}
	mine := plugin.FieldManager("mesh")
	intact := protections{why: map[plugin.Ref]string{ztRef: "", owner: ""}}
	broken := protections{why: map[plugin.Ref]string{ztRef: "was changed by another writer (x set spec.action)", owner: ""}}

	p := newPlan()
	got := decideLabels(p, labelled(nil, mine), intact, holds{})
	assert.Equal(t, map[string]string{"mode": "on", "route": "wp", "free": "x"}, got)
	assert.Empty(t, p.res.Waiting)

	// A broken requirement: withheld, and every label that needs it says why.
	p = newPlan()
	got = decideLabels(p, labelled(map[string]string{"mode": "on"}, mine, "mode"), broken, holds{})
	assert.Equal(t, map[string]string{"free": "x"}, got)
	assert.Equal(t, []string{
		"label mode withheld: AuthorizationPolicy.security.istio.io/zt was changed by another writer (x set spec.action)",
		"label route withheld: AuthorizationPolicy.security.istio.io/zt was changed by another writer (x set spec.action)",
	}, p.res.Waiting)
	assert.Empty(t, p.res.Warnings, "our own label comes off: nothing to warn about")

	// Held for pods: kept, with a warning, only with the value it has.
	held := holdDataPlane([]plugin.Plugin{dataPlanePlugin{name: "mesh"}}, labelled(map[string]string{"mode": "on"}, mine, "mode"), plugin.Observed{Pods: pods("a")})
	p = newPlan()
	got = decideLabels(p, labelled(map[string]string{"mode": "on"}, mine, "mode"), broken, held)
	assert.Equal(t, "on", got["mode"])
	assert.NotContains(t, got, "route")
	assert.Equal(t, []string{"label mode=on stays although AuthorizationPolicy.security.istio.io/zt was changed by another writer (x set spec.action): 1 running pod(s) would otherwise be outside every data plane: a"}, p.res.Warnings)

	// Held, requirement broken, and the plugin wants another value: no "stays" warning for a value
	// that is not there; the held value stays and the plugin waits.
	p = newPlan()
	p.desired.Labels["mode"] = "other"
	got = decideLabels(p, labelled(map[string]string{"mode": "on"}, mine, "mode"), broken, held)
	assert.Equal(t, "on", got["mode"])
	assert.Empty(t, p.res.Warnings)
	assert.Contains(t, p.res.Waiting, "label mode withheld: AuthorizationPolicy.security.istio.io/zt was changed by another writer (x set spec.action)")

	// Held, but the plugin wants another value: the held value stays and the plugin waits.
	p = newPlan()
	p.desired.Labels["mode"] = "other"
	got = decideLabels(p, labelled(map[string]string{"mode": "on"}, mine, "mode"), intact, held)
	assert.Equal(t, "on", got["mode"])
	assert.Len(t, p.res.Waiting, 1)
	assert.Contains(t, p.res.Waiting[0], "keeps mode=on")

	// Held and no longer wanted: the same.
	p = newPlan()
	delete(p.desired.Labels, "mode")
	got = decideLabels(p, labelled(map[string]string{"mode": "on"}, mine, "mode"), intact, held)
	assert.Equal(t, "on", got["mode"])
	assert.Len(t, p.res.Waiting, 1)

	// Held and wanted as it is: no waiting.
	p = newPlan()
	decideLabels(p, labelled(map[string]string{"mode": "on"}, mine, "mode"), intact, held)
	assert.Empty(t, p.res.Waiting)

	// Another writer's enrolment without the protection is reported.
	p = newPlan()
	ns := labelled(map[string]string{"mode": "on", "route": "elsewhere"}, "kubectl-label", "mode", "route")
	decideLabels(p, ns, broken, holds{})
	assert.Equal(t, []string{"namespace label mode=on was set by kubectl-label although AuthorizationPolicy.security.istio.io/zt was changed by another writer (x set spec.action): the namespace is enrolled without that protection"}, p.res.Warnings)

	// A preview has no namespace.
	p = newPlan()
	p.desired.Labels = nil
	assert.Equal(t, map[string]string{}, decideLabels(p, nil, intact, holds{}))
}

func TestProtection(t *testing.T) {
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
		managed("drifted", "authz", entry("gitops", metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{"f:action":{}}}`)),
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

func TestControlledBy(t *testing.T) {
	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{UID: "p1"}}
	ns := func(refs ...metav1.OwnerReference) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{OwnerReferences: refs}}
	}
	yes := true
	no := false
	assert.True(t, controlledBy(ns(metav1.OwnerReference{UID: "p1", Controller: &yes}), profile))
	assert.False(t, controlledBy(ns(metav1.OwnerReference{UID: "p1", Controller: &no}), profile), "an owner, not the controller")
	assert.False(t, controlledBy(ns(metav1.OwnerReference{UID: "other", Controller: &yes}), profile))
	assert.False(t, controlledBy(ns(), profile))
	assert.False(t, controlledBy(ns(metav1.OwnerReference{UID: "", Controller: &yes}), &profilev1.Profile{}), "a Profile without UID controls nothing")
}

// A field the plugin's own restoring Update holds outlives the apply that stops setting it, so
// once the body drops it, it is drift even though the apply still co-owns it now.
func TestForeignSpecFieldsForABodyThatDropsAField(t *testing.T) {
	const mine = "profile-plugins/authz"
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	obj := withFields(
		entry(mine, apply, "", `{"f:spec":{"f:rules":{},"f:targetRefs":{}}}`),
		entry(mine, update, "", `{"f:spec":{"f:rules":{},"f:targetRefs":{}}}`),
	)
	sidecar := map[string]any{"spec": map[string]any{"rules": []any{}}}
	ambient := map[string]any{"spec": map[string]any{"rules": []any{}, "targetRefs": []any{}}}
	assert.Equal(t, map[string][]string{mine: {"spec.targetRefs"}}, foreignSpecFieldsFor(obj, "authz", sidecar))
	assert.Equal(t, map[string][]string{}, foreignSpecFieldsFor(obj, "authz", ambient))
	assert.Equal(t, map[string][]string{}, foreignSpecFieldsFor(obj, "authz", nil), "without a body: as foreignSpecFields")
}
