package runner

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/ssa"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// decorate checks a plugin's objects and builds their apply bodies: managed labels, the Profile
// as controller owner (when the Profile has a UID) and, for the objects in protect, with it
// plugin.ProtectionFinalizer, no status, and the desired-hash annotation.
func decorate(s *runtime.Scheme, p plugin.Plugin, t plugin.Target, objs []client.Object, protect map[plugin.Ref]bool) ([]applyObject, error) {
	kinds := map[schema.GroupVersionKind]bool{}
	for _, l := range p.Kinds() {
		gvk, err := gvkFor(s, l)
		if err != nil {
			return nil, err
		}
		kinds[gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))] = true
	}
	out := make([]applyObject, 0, len(objs))
	seen := map[plugin.Ref]bool{}
	for i, obj := range objs {
		gvk, err := gvkFor(s, obj)
		if err != nil {
			return nil, fmt.Errorf("objects[%d]: %w", i, err)
		}
		if !kinds[gvk] {
			return nil, fmt.Errorf("objects[%d]: %s is not among the plugin's Kinds(), so it could never be pruned", i, gvk.Kind)
		}
		ref := plugin.Ref{GroupKind: gvk.GroupKind(), Name: obj.GetName()}
		if obj.GetName() == "" {
			return nil, fmt.Errorf("objects[%d] (%s): metadata.name is empty", i, gvk.Kind)
		}
		if ns := obj.GetNamespace(); ns != "" && ns != t.Namespace {
			return nil, fmt.Errorf("objects[%d] (%s): metadata.namespace %q is not the target namespace %q", i, ref, ns, t.Namespace)
		}
		if seen[ref] {
			return nil, fmt.Errorf("objects[%d]: %s is generated twice", i, ref)
		}
		seen[ref] = true

		body, err := applyBody(obj, gvk)
		if err != nil {
			return nil, fmt.Errorf("objects[%d] (%s): %w", i, ref, err)
		}
		// Decorate the JSON form directly: cheaper than copying the typed object first.
		md, _ := body["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			body["metadata"] = md
		}
		md["namespace"] = t.Namespace
		labels, _ := md["labels"].(map[string]any)
		if labels == nil {
			labels = make(map[string]any, 2)
			md["labels"] = labels
		}
		labels[plugin.ManagedByLabel] = plugin.ManagedByValue
		labels[plugin.PluginLabel] = p.Name()
		if t.Profile != nil && t.Profile.UID != "" {
			md["ownerReferences"] = []any{map[string]any{
				"apiVersion":         profilev1.GroupVersion.String(),
				"kind":               profilev1.Kind,
				"name":               t.Profile.Name,
				"uid":                string(t.Profile.UID),
				"controller":         true,
				"blockOwnerDeletion": true,
			}}
			if protect[ref] {
				// The owner reference is what lets garbage collection delete the object with the
				// Profile; the finalizer keeps it until its pods are gone (see finalizer.go).
				finalizers, _ := md["finalizers"].([]any)
				if !slices.Contains(finalizers, any(plugin.ProtectionFinalizer)) {
					md["finalizers"] = append(finalizers, plugin.ProtectionFinalizer)
				}
			}
		}
		out = append(out, applyObject{ref: ref, gvk: gvk, data: body})
	}
	return out, nil
}

// cleanUnstructured is obj's JSON form as applyBody makes it.
func cleanUnstructured(s *runtime.Scheme, obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := gvkFor(s, obj)
	if err != nil {
		return nil, err
	}
	m, err := applyBody(obj, gvk)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// applyBody is obj's JSON form with apiVersion and kind, without status (never ours to apply)
// and without the empty creationTimestamp that typed objects marshal.
func applyBody(obj client.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	m, err := ssa.ToMap(obj)
	if err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	return m, nil
}

// withHash returns a copy of the apply body carrying the desired-hash annotation.
func withHash(data map[string]any) (map[string]any, error) {
	u := (&unstructured.Unstructured{Object: data}).DeepCopy()
	h, err := ssa.DesiredHash(u.Object)
	if err != nil {
		return nil, err
	}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[plugin.DesiredHashAnnotation] = h
	u.SetAnnotations(ann)
	return u.Object, nil
}
