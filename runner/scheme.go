package runner

import (
	"reflect"
	"sync"

	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// NewScheme returns a scheme with every type the plugins write or read: the Kubernetes core
// types, Istio security/v1 and Gateway API v1. It has no Profile type; a standalone controller adds
// profilev1.AddToScheme, and the profiles controller already registers its own.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(AddToScheme(s))
	return s
}

// AddToScheme adds the types of [NewScheme] to s, for a controller that has a scheme already.
// Adding a type s already knows is harmless; it never registers kubeflow.org types, so it cannot
// clash with the profiles controller's own Profile.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		istiosecurityv1.AddToScheme,
		gatewayv1.Install,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// gvkCache remembers the scheme's answer per Go type: the lookup allocates, and the runner asks
// for the same few types on every reconcile.
var gvkCache sync.Map // gvkKey -> schema.GroupVersionKind

type gvkKey struct {
	s *runtime.Scheme
	t reflect.Type
}

// gvkFor is the kind of obj in s.
func gvkFor(s *runtime.Scheme, obj runtime.Object) (schema.GroupVersionKind, error) {
	switch obj.(type) {
	// One Go type stands for many kinds here: the kind is in the object, never cache it by type.
	case runtime.Unstructured, *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return apiutil.GVKForObject(obj, s)
	}
	key := gvkKey{s, reflect.TypeOf(obj)}
	if v, ok := gvkCache.Load(key); ok {
		return v.(schema.GroupVersionKind), nil
	}
	gvk, err := apiutil.GVKForObject(obj, s)
	if err != nil {
		return gvk, err
	}
	gvkCache.Store(key, gvk)
	return gvk, nil
}
