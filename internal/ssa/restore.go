package ssa

import (
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// RestoredBody is cur with exactly the desired content (spec, data, binaryData and meaning
// metadata) and the desired labels, annotations and owner reference laid over its metadata, for
// an Update that carries cur's resourceVersion as precondition: server-side apply cannot take
// away fields another manager owns, an Update replaces them. Other writers' metadata outside
// Istio's domain (labels, annotations, finalizers, owners) is kept: istiod does not read it, and
// removing it is not the runner's business. Status is kept as observed; the API server ignores it
// on the main resource anyway. managedFields are left out, so the server keeps and updates them.
func RestoredBody(cur metav1.Object, desired map[string]any) (*unstructured.Unstructured, error) {
	m, err := ToMap(cur)
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
	u.SetLabels(restoredMetadata(u.GetLabels(), want.GetLabels()))
	u.SetAnnotations(restoredMetadata(u.GetAnnotations(), want.GetAnnotations()))
	owners := u.GetOwnerReferences()
	for _, o := range want.GetOwnerReferences() {
		if !slices.ContainsFunc(owners, func(have metav1.OwnerReference) bool { return have.UID == o.UID }) {
			owners = append(owners, o)
		}
	}
	u.SetOwnerReferences(owners)
	return u, nil
}

// restoredMetadata is have with its meaning keys exactly as in want (absent when want lacks them)
// and every key of want laid over it; other keys are kept.
func restoredMetadata(have, want map[string]string) map[string]string {
	out := make(map[string]string, len(have)+len(want))
	for k, v := range have {
		if !IsMeaningKey(k) {
			out[k] = v
		}
	}
	maps.Copy(out, want)
	return out
}
