package ssa

import (
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// contentRoots are the top-level fields that say what an object does: a policy's or Gateway's
// spec, and a ConfigMap's data and binaryData (istiod applies every key of the waypoint's patch
// ConfigMap to the waypoint's Deployment, Service, ServiceAccount, ...).
var contentRoots = []string{"spec", "data", "binaryData"}

// metadataMaps are the metadata fields whose keys may be meaning metadata.
var metadataMaps = []string{"labels", "annotations"}

// IsMeaningKey reports whether a label or annotation key is in Istio's domain: its prefix, the
// part before '/', is istio.io or ends in .istio.io (sidecar.istio.io, networking.istio.io,
// gateway.istio.io, ...). On an object the runner manages, such a key is content like its spec
// (see the package documentation for why the domain, and not a list of keys, is the rule). A
// key without a prefix is not: istiod reads none.
func IsMeaningKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && (prefix == "istio.io" || strings.HasSuffix(prefix, ".istio.io"))
}

// meaningPath is the path of a meaning key under metadata.labels or metadata.annotations, as the
// other content paths are written: "metadata.labels.istio.io/rev".
func meaningPath(field, key string) string {
	return "metadata." + field + "." + key
}

// meaningKeyOf splits a content path into the metadata field and the meaning key it names; ok is
// false for a path that is not meaning metadata.
func meaningKeyOf(p string) (field, key string, ok bool) {
	for _, f := range metadataMaps {
		if key, ok := strings.CutPrefix(p, "metadata."+f+"."); ok {
			return f, key, true
		}
	}
	return "", "", false
}

// metadataMap is the labels or annotations of obj.
func metadataMap(obj metav1.Object, field string) map[string]string {
	if field == "labels" {
		return obj.GetLabels()
	}
	return obj.GetAnnotations()
}

// bodyMetadata is the labels or annotations an apply body sets, nil when it sets none.
func bodyMetadata(body map[string]any, field string) map[string]any {
	md, _ := body["metadata"].(map[string]any)
	m, _ := md[field].(map[string]any)
	return m
}

// MissingMeaning lists, as sorted paths, the meaning keys body sets that obj does not carry. A
// removal leaves no trace in managedFields (the remover owns nothing it removed), so these are
// found only by comparing the object with the body.
func MissingMeaning(obj metav1.Object, body map[string]any) []string {
	var out []string
	for _, field := range metadataMaps {
		have := metadataMap(obj, field)
		for k := range bodyMetadata(body, field) {
			if _, ok := have[k]; IsMeaningKey(k) && !ok {
				out = append(out, meaningPath(field, k))
			}
		}
	}
	slices.Sort(out)
	return out
}

// unrecordedMeaning lists, as sorted paths, the meaning keys obj carries that no managedFields
// entry of the object itself holds: what someone who cleared the object's managedFields (an
// Update with managedFields [{}]) left behind, or a server that records no ownership. Nobody can
// be named for them, and nothing proves they are the plugin's, so they are drift unless body sets
// them to the value they have. With a nil body every such key counts.
func unrecordedMeaning(obj metav1.Object, body map[string]any) []string {
	// The keys in question first: in the steady state the body sets every meaning key the object
	// has, and no managedFields need decoding.
	var candidates []string
	for _, field := range metadataMaps {
		want := bodyMetadata(body, field)
		for k, v := range metadataMap(obj, field) {
			if w, ok := want[k]; IsMeaningKey(k) && (!ok || w != v) {
				candidates = append(candidates, meaningPath(field, k))
			}
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	held := map[string]bool{}
	for _, e := range obj.GetManagedFields() {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		labels, annotations, err := ManagedLabelKeys(e)
		if err != nil {
			continue // ForeignFields and ApplyExtras report what cannot be read
		}
		for _, k := range labels {
			held[meaningPath("labels", k)] = true
		}
		for _, k := range annotations {
			held[meaningPath("annotations", k)] = true
		}
	}
	var out []string
	for _, p := range candidates {
		if !held[p] {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// WithoutMeaning is body without the meaning keys at paths (as [MissingMeaning] names them), for
// asking what else differs. body is not changed; its metadata maps are copied where a key goes.
func WithoutMeaning(body map[string]any, paths []string) map[string]any {
	if len(paths) == 0 {
		return body
	}
	out := maps.Clone(body)
	md, _ := body["metadata"].(map[string]any)
	md = maps.Clone(md)
	out["metadata"] = md
	for _, p := range paths {
		field, key, ok := meaningKeyOf(p)
		if !ok {
			continue
		}
		m, _ := md[field].(map[string]any)
		m = maps.Clone(m)
		delete(m, key)
		md[field] = m
	}
	return out
}
