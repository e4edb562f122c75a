package runner

import (
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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
