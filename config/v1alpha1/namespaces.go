package v1alpha1

import (
	"slices"
	"strings"
)

// ReservedNamespaces lists the namespaces no Profile may have, sorted and without duplicates:
// kube-* and default, the mesh root namespace, istiod's namespace (where istiod reads the waypoint
// class defaults, which patch every waypoint of the cluster), the namespace of every principal the access
// policies trust (the ingress gateway's and every platform caller's: kubeflow for the default
// Pipelines UI, notebook and Katib controllers), the namespaces, principals and service accounts
// of every L4 exception (an ipBlocks exception names no namespace), and namespaces.reserved.
//
// A trusted namespace must not be a user's: whoever owns it could run a pod under a trusted
// service account (the pipelines UI forwards any user id) or, for an L4 exception, reach every
// user namespace past the waypoint. And writing a user namespace's policies there would cut the
// platform off from the users it serves.
func (c *Config) ReservedNamespaces() []string {
	out := []string{"kube-*", "default", c.Mesh.RootNamespace, c.Mesh.IstiodNamespace}
	out = append(out, principalNamespace(c.Authorization.Principals.IngressGateway))
	for _, pc := range c.Authorization.PlatformCallers {
		out = append(out, principalNamespace(pc.Principal))
	}
	for _, e := range c.Authorization.L4Exceptions {
		out = append(out, e.Namespaces...)
		for _, principal := range e.Principals {
			out = append(out, principalNamespace(principal))
		}
		for _, sa := range e.ServiceAccounts {
			ns, _, _ := strings.Cut(sa, "/")
			out = append(out, ns)
		}
	}
	// The guard trusts these identities in every managed namespace: a Profile's members may run
	// pods as any ServiceAccount of their namespace, so none of them may live in one.
	for _, sa := range append(append([]string{c.Guard.ControllerServiceAccount, c.Guard.KatibController()}, c.Guard.MeshServiceAccounts...), c.Guard.PolicyWriters...) {
		ns, _, _ := strings.Cut(sa, "/")
		out = append(out, ns)
	}
	out = append(out, c.Namespaces.Reserved...)
	out = slices.DeleteFunc(out, func(s string) bool { return s == "" })
	slices.Sort(out)
	return slices.Compact(out)
}
