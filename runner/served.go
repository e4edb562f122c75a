package runner

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// A kind whose CRD is not installed has no objects: the runner observes it as empty, so it has
// nothing to prune of it, and a mode that emits no such kind works on a cluster without that CRD
// (sidecar and none mode without the Gateway API, none mode without Istio). A plugin that wants to
// write such a kind fails as a whole, naming the CRD, so that none of its labels enrols the
// namespace into a data plane whose objects cannot exist (ambient mode without the Gateway API).
//
// What is served is discovered, not configured: the List of a kind answers it. Both a
// controller-runtime client and its cache map the kind through the RESTMapper first and return a
// NoKindMatchError when it has none (client/apiutil/restmapper.go and cache/internal/informers.go,
// makeListWatcher, v0.24.1). That dynamic RESTMapper asks discovery again on every miss, so a CRD
// installed later is found by the next reconcile, at the cost of one discovery request per
// unserved kind and reconcile until then (in place of the List it would otherwise send). A kind
// it has found stays mapped after its CRD is removed: a direct List then answers NotFound, which
// counts as not served too, and a cache that watched the kind keeps answering from its (emptied)
// store, so such a removal never wedges the reconciles.

// notServed says whether err, from listing the kind gvk, means the API server does not serve it.
// A cache with ReaderFailOnMissingInformer refuses a kind it has no informer for, as it has none
// for a kind it could not watch: then the mapper answers. Any other error is an error.
func notServed(err error, m meta.RESTMapper, gvk schema.GroupVersionKind) bool {
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		// A namespaced List never answers NotFound otherwise, not even for a missing namespace.
		return true
	}
	if notCached := (*cache.ErrResourceNotCached)(nil); errors.As(err, &notCached) && m != nil {
		_, mapErr := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		return meta.IsNoMatchError(mapErr)
	}
	return false
}

// unserved holds the kinds of the plugins' Kinds that the API server does not serve (their CRDs
// are not installed): they have no objects, and a plugin that wants one fails.
type unserved map[schema.GroupVersionKind]bool

// wantsNotServed returns an error naming each object among objs whose kind the API server does not
// serve, and the CRD that would serve it; nil when all are served. It is not an input error: once
// the CRD is installed the same call succeeds, and no watch sees that happen, so it is retried.
func wantsNotServed(objs []applyObject, notServed unserved) error {
	var missing []string
	for _, o := range objs {
		if !notServed[o.gvk] {
			continue
		}
		missing = append(missing, fmt.Sprintf("%s (install the CRD %s, version %s)", o.ref, crdName(o.gvk), o.gvk.Version))
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the API server does not serve the kind of %s; nothing of this plugin is applied until it does",
		strings.Join(missing, ", "))
}

// crdName is the name of the CRD that would serve gvk, <plural>.<group>. The API server cannot
// tell the plural of a kind it does not serve, so it is guessed like apimachinery's
// UnsafeGuessKindToResource, which turns Gateway into "gatewaies": a y after a vowel takes an s.
func crdName(gvk schema.GroupVersionKind) string {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	res := plural.Resource
	if k := strings.ToLower(gvk.Kind); len(k) > 1 && strings.HasSuffix(k, "y") && strings.ContainsRune("aeiou", rune(k[len(k)-2])) {
		res = k + "s"
	}
	return res + "." + gvk.Group
}
