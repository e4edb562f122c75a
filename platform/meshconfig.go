package platform

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

// meshConfigKinds are the kinds of Istio's and the Gateway API's configuration the guard's
// mesh-config policy refuses in managed namespaces (guard.MeshConfigPolicy), each with the
// version the platform check lists it at. ALLOW AuthorizationPolicies are not listed: who wrote
// one is not visible afterwards, and the authz plugin reports those that void its protection.
var meshConfigKinds = []struct{ apiVersion, kind string }{
	{"networking.istio.io/v1alpha3", "EnvoyFilter"}, {"extensions.istio.io/v1alpha1", "WasmPlugin"},
	{"networking.istio.io/v1beta1", "ProxyConfig"}, {"networking.istio.io/v1", "Sidecar"},
	{"security.istio.io/v1", "PeerAuthentication"}, {"networking.istio.io/v1", "ServiceEntry"},
	{"networking.istio.io/v1", "WorkloadEntry"}, {"networking.istio.io/v1", "WorkloadGroup"},
	{"gateway.networking.k8s.io/v1", "Gateway"},
}

// checkMeshConfig reports the mesh configuration that exists in managed namespaces although the
// guard would refuse it now (made before the guard, or by a writer it trusts): each could widen
// what its namespace admits or skip its waypoint. A kind the API server does not serve is skipped.
func checkMeshConfig(ctx context.Context, r client.Reader, cfg *config.Config) ([]Finding, error) {
	managed, err := managedNamespaces(ctx, r, cfg)
	if err != nil || len(managed) == 0 {
		return nil, err
	}
	var out []Finding
	for _, k := range meshConfigKinds {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(k.apiVersion)
		list.SetKind(k.kind + "List")
		if err := r.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("listing %s: %w", k.kind, err)
		}
		for _, o := range list.Items {
			if !managed[o.GetNamespace()] || allowedMeshConfig(cfg, k.kind, o.GetName()) {
				continue
			}
			out = append(out, Finding{Kind: FindingMeshConfigInUserNamespace, What: k.kind + "/" + o.GetName(), Namespace: o.GetNamespace(),
				Problem: fmt.Sprintf("%s %s/%s is in a user namespace, where it could widen what the namespace admits or let traffic skip its waypoint; the guard refuses it now, but it was made before",
					k.kind, o.GetNamespace(), o.GetName()),
				Fix: "delete it, or, if the platform needs it, name it in guard.meshConfigAllowed and render the guard again"})
		}
	}
	return out, nil
}

// allowedMeshConfig is whether guard.meshConfigAllowed names the object, or it is the waypoint.
func allowedMeshConfig(cfg *config.Config, kind, name string) bool {
	if kind == "Gateway" && name == cfg.Mesh.Waypoint.Name {
		return true
	}
	return slices.Contains(cfg.Guard.MeshConfigAllowed, config.MeshObject{Kind: kind, Name: name})
}

// managedNamespaces are the namespaces the guard considers managed: an owner annotation that is
// not empty, and a name that is not reserved.
func managedNamespaces(ctx context.Context, r client.Reader, cfg *config.Config) (map[string]bool, error) {
	list := &corev1.NamespaceList{}
	if err := r.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	reserved := ownership.Policy{Reserved: cfg.ReservedNamespaces()}
	out := map[string]bool{}
	for _, n := range list.Items {
		if _, isReserved := reserved.ReservedBy(n.Name); n.Annotations[ownership.OwnerAnnotation] != "" && !isReserved {
			out[n.Name] = true
		}
	}
	return out, nil
}
