package runner

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"istio.io/api/annotation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/ssa"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// contentRoots are the top-level fields that say what an object does: a policy's or Gateway's
// spec, and a ConfigMap's data and binaryData (istiod applies every key of the waypoint's patch
// ConfigMap to the waypoint's Deployment, Service, ServiceAccount, ...).
var contentRoots = []string{"spec", "data", "binaryData"}

// meaningAnnotations are the annotations that change what an object does, kept as desired like
// its spec: istio.io/dry-run "true" on an AuthorizationPolicy switches it off (istiod sends it to
// no ztunnel and turns it into shadow rules in proxies: istio/istio
// pilot/pkg/serviceregistry/ambient/authorization.go, convertAuthorizationPolicy, and
// pilot/pkg/security/authz/builder/builder.go, isDryRun). A plugin that sets one states its value
// in the object; a restore sets it to that value, or removes it when the plugin does not set it.
var meaningAnnotations = []string{annotation.IoIstioDryRun.Name}

// foreignSpecFields lists, per field manager other than the plugin's own, the content fields
// (spec, data, binaryData and the [meaningAnnotations]) that manager owns and the plugin does
// not: fields another writer added or took over. Each of them may change what a protective
// object means (an AuthorizationPolicy's action, selector, targetRefs or dry-run; a Gateway's
// listeners; another key in the waypoint's patch ConfigMap), and server-side apply cannot take
// them away. Status writers (istiod on a Gateway) are not counted: they write a subresource.
// Fields the API server defaulted belong to no manager and are not counted either.
// The result maps manager to sorted paths; an Update by the plugin's own manager is listed under
// its name.
func foreignSpecFields(obj client.Object, pluginName string) map[string][]string {
	return foreignSpecFieldsFor(obj, pluginName, nil)
}

// foreignSpecFieldsFor is foreignSpecFields knowing the apply body about to be sent (nil when
// unknown). A field the plugin's own restoring Update holds is drift even while the plugin's apply
// co-owns it, once the body no longer sets it: the apply then lets go of the field, the Update
// entry keeps it, and it would outlive the plugin's wish (targetRefs on a policy after a switch
// to sidecar mode, which attaches the policy to nothing). With a body, the content fields the
// plugin's own Apply entry holds and the body does not set are listed under the plugin's manager
// too, whoever applied them under that name (ownApplyExtras).
func foreignSpecFieldsFor(obj client.Object, pluginName string, body map[string]any) map[string][]string {
	mine := plugin.FieldManager(pluginName)
	out := map[string][]string{}
	if body != nil {
		// Fields under the plugin's own Apply entry that the body does not set: see ownfields.go.
		if extras := ownApplyExtras(obj, pluginName, body); len(extras) > 0 {
			out[mine] = extras
		}
	}
	if !slices.ContainsFunc(obj.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
		return e.Subresource == "" && (e.Manager != mine || e.Operation != metav1.ManagedFieldsOperationApply)
	}) {
		return out // no other writer, nothing more to parse
	}
	own := map[string]bool{}
	foreign := map[string]map[string]bool{}
	for _, e := range obj.GetManagedFields() {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		paths := contentPaths(fields)
		if len(paths) == 0 {
			continue
		}
		// Only the plugin's apply owns fields for good: the fields of its own restoring Update
		// (below) are not removed when the plugin stops setting them, so they must show as drift.
		if e.Manager == mine && e.Operation == metav1.ManagedFieldsOperationApply {
			maps.Copy(own, paths)
			continue
		}
		if foreign[e.Manager] == nil {
			foreign[e.Manager] = map[string]bool{}
		}
		maps.Copy(foreign[e.Manager], paths)
	}
	if body != nil {
		for _, root := range contentRoots {
			desired, _ := body[root].(map[string]any)
			for p := range own {
				rest, below := strings.CutPrefix(p, root+".")
				if top, _, _ := strings.Cut(rest, "."); below && desired[top] == nil {
					delete(own, p)
				}
			}
		}
	}
	for manager, paths := range foreign {
		for p := range paths {
			if !own[p] && !slices.Contains(out[manager], p) {
				out[manager] = append(out[manager], p)
			}
		}
		if len(out[manager]) == 0 {
			delete(out, manager)
			continue
		}
		sort.Strings(out[manager])
	}
	return out
}

// contentPaths is the set of content fields one managedFields entry holds.
func contentPaths(fields map[string]any) map[string]bool {
	paths := map[string]bool{}
	for _, root := range contentRoots {
		// A bare node owns no field: it is what a writer's entry keeps once every field it set
		// was taken over (the previous writer of an adopted policy). A field set atomically still
		// shows as a leaf below it ("f:targetRefs": {}), so it is not skipped here.
		if tree, ok := fields["f:"+root].(map[string]any); ok && len(tree) > 0 {
			fieldPaths(root, tree, paths)
		}
	}
	md, _ := fields["f:metadata"].(map[string]any)
	ann, _ := md["f:annotations"].(map[string]any)
	for _, a := range meaningAnnotations {
		if _, ok := ann["f:"+a]; ok {
			paths["metadata.annotations."+a] = true
		}
	}
	return paths
}

// fieldPaths collects the leaves of a managedFields (FieldsV1) tree as dotted paths: "f:x" is a
// field, "k:{...}" a list item by key, "v:..." a set item; "." marks the node itself.
func fieldPaths(prefix string, tree map[string]any, out map[string]bool) {
	if len(tree) == 0 {
		out[prefix] = true
		return
	}
	for k, v := range tree {
		if k == "." {
			out[prefix] = true
			continue
		}
		name := k
		switch {
		case strings.HasPrefix(k, "f:"):
			name = "." + k[2:]
		case strings.HasPrefix(k, "k:"), strings.HasPrefix(k, "v:"), strings.HasPrefix(k, "i:"):
			name = "[" + k[2:] + "]"
		}
		sub, _ := v.(map[string]any)
		fieldPaths(prefix+name, sub, out)
	}
}

// withoutManager is foreign without the named manager's entry.
func withoutManager(foreign map[string][]string, manager string) map[string][]string {
	out := maps.Clone(foreign)
	delete(out, manager)
	return out
}

// describeForeign says which other writers hold which spec fields, for a warning.
func describeForeign(foreign map[string][]string) string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(foreign)) {
		who := m
		if who == "" {
			who = "an unnamed field manager"
		}
		parts = append(parts, fmt.Sprintf("%s set %s", who, strings.Join(foreign[m], ", ")))
	}
	return strings.Join(parts, "; ")
}

// restoredBody is cur with exactly the desired content (spec, data, binaryData and meaning
// annotations) and the desired labels, annotations and owner reference laid over its metadata,
// for an Update that carries cur's resourceVersion as
// precondition. Other writers' metadata (labels, annotations, finalizers, owners) is kept: it does
// not change what the object protects, and removing it is not the plugin's business. Status is
// kept as observed; the API server ignores it on the main resource anyway.
func restoredBody(cur client.Object, desired map[string]any) (*unstructured.Unstructured, error) {
	m, err := ssa.ToMap(cur)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion((&unstructured.Unstructured{Object: desired}).GetAPIVersion())
	u.SetKind((&unstructured.Unstructured{Object: desired}).GetKind())
	u.SetManagedFields(nil)
	want := &unstructured.Unstructured{Object: desired}
	for _, root := range contentRoots {
		if v, ok := desired[root]; ok {
			m[root] = v
		} else {
			delete(m, root)
		}
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, want.GetLabels())
	u.SetLabels(labels)
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	for _, a := range meaningAnnotations {
		delete(ann, a) // back to the desired value below, or to absent
	}
	maps.Copy(ann, want.GetAnnotations())
	u.SetAnnotations(ann)
	owners := u.GetOwnerReferences()
	for _, o := range want.GetOwnerReferences() {
		if !slices.ContainsFunc(owners, func(have metav1.OwnerReference) bool { return have.UID == o.UID }) {
			owners = append(owners, o)
		}
	}
	u.SetOwnerReferences(owners)
	return u, nil
}
