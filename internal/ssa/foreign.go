package ssa

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Unrecorded is the field manager ForeignFields names for meaning metadata that no managedFields
// entry holds (see unrecordedMeaning): the API server recorded no writer for it.
const Unrecorded = "a writer the API server did not record"

// ForeignFields lists, per field manager other than manager's Apply, the content fields (spec,
// data, binaryData and the meaning metadata) that field manager owns and manager's Apply entry
// does not: fields another writer added or took over. Each of them may change what a protective
// object means (an AuthorizationPolicy's action, selector, targetRefs, dry-run or revision; a
// Gateway's listeners or its istio.io keys; another key in the waypoint's patch ConfigMap), and
// server-side apply cannot take them away. Status writers (istiod on a Gateway) are not counted:
// they write a subresource. Fields the API server defaulted belong to no manager and are not
// counted either; meaning metadata that no entry holds is listed under [Unrecorded]. The result
// maps field manager to sorted paths; an Update under manager's own name is listed under it.
//
// body is the apply body about to be sent under manager, or nil when unknown. With it, a field
// manager's own restoring Update holds is drift even while its Apply co-owns it, once the body no
// longer sets it: the apply then lets go of the field, the Update entry keeps it, and it would
// outlive the wish (targetRefs on a policy after a switch to sidecar mode, which attaches the
// policy to nothing). And the content fields manager's Apply entry holds that the body does not
// set are listed under manager too, whoever applied them under that name (see [ApplyExtras]).
func ForeignFields(obj metav1.Object, manager string, body map[string]any) map[string][]string {
	out := map[string][]string{}
	if body != nil {
		if extras := ApplyExtras(obj, manager, body); len(extras) > 0 {
			out[manager] = extras
		}
	}
	if keys := unrecordedMeaning(obj, body); len(keys) > 0 {
		out[Unrecorded] = keys
	}
	if !slices.ContainsFunc(obj.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
		return e.Subresource == "" && (e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply)
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
		// Only manager's apply owns fields for good: the fields of its own restoring Update
		// (below) are not removed when the body stops setting them, so they must show as drift.
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply {
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
				// The top field ends at its first '.' or at a list item's '[': listeners in
				// spec.listeners[{"name":"mesh"}].port.
				top := rest
				if i := strings.IndexAny(rest, ".["); i >= 0 {
					top = rest[:i]
				}
				if below && desired[top] == nil {
					delete(own, p)
				}
			}
		}
		for p := range own {
			if field, key, ok := meaningKeyOf(p); ok {
				if _, set := bodyMetadata(body, field)[key]; !set {
					delete(own, p)
				}
			}
		}
	}
	for m, paths := range foreign {
		for p := range paths {
			if !own[p] && !slices.Contains(out[m], p) {
				out[m] = append(out[m], p)
			}
		}
		if len(out[m]) == 0 {
			delete(out, m)
			continue
		}
		sort.Strings(out[m])
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
		//
		// The root's own marker ("." under "f:spec") says only that the root exists, which every
		// body with that root wants too; the API server's before-first-apply entry (made when an
		// object without managedFields is applied) holds it, and so may any writer that set the
		// whole spec. What it holds below the root is counted.
		tree, _ := fields["f:"+root].(map[string]any)
		if _, marked := tree["."]; marked {
			tree = maps.Clone(tree)
			delete(tree, ".")
		}
		if len(tree) > 0 {
			fieldPaths(root, tree, paths)
		}
	}
	md, _ := fields["f:metadata"].(map[string]any)
	for _, field := range metadataMaps {
		keys, _ := md["f:"+field].(map[string]any)
		for k := range keys {
			if key, ok := strings.CutPrefix(k, "f:"); ok && IsMeaningKey(key) {
				paths[meaningPath(field, key)] = true
			}
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
