// Package authz is the access plugin: the AuthorizationPolicies that keep one Kubeflow user out of
// another user's namespace, in sidecar and ambient mode, plus the functions the access-management
// service (kfam) and migrations need.
//
// # Sidecar mode
//
// One policy, ns-owner-access-istio, with the rules the profiles controller has always written:
// the ingress gateway and the Pipelines UI may call in on behalf of the owner (the user-id header
// must name the owner), the namespace may call itself, health paths are open, the notebook
// controller may GET kernels, and Katib's controller may reach the suggestion services it runs in
// the namespace. Each contributor gets a policy of its own (see [ContributorPolicy]).
//
// # Ambient mode: two layers, so nothing fails open
//
// Header and path rules can only be enforced by a waypoint. So the same owner and contributor
// policies are attached to the namespace's waypoint Gateway with targetRefs. That alone would fail
// open: while the waypoint is missing, not yet Programmed, or skipped (pod-IP traffic), ztunnel
// sends traffic straight to the pods and no L7 rule runs. The plugin therefore also writes a
// namespace-wide ALLOW policy that ztunnel enforces ([ZtunnelPolicy]), using only L4 attributes,
// which admits:
//
//   - the waypoint's own identity (source.serviceAccounts <namespace>/<waypoint name>; istiod
//     names a waypoint's ServiceAccount after its Gateway), so traffic that passed the L7 policy
//     arrives;
//   - the namespace itself;
//   - the admin's L4 exceptions, such as a monitoring namespace scraping pod IPs.
//
// Once a namespace has any ALLOW policy, ztunnel denies everything else. Crucially it does not
// admit the ingress gateway: with istio.io/ingress-use-waypoint the ingress's requests arrive
// through the waypoint, and letting the ingress reach pods directly would let a request skip the
// owner's header check. The config validation refuses L4 exceptions that would admit it.
//
// Every policy without targetRefs that this package writes uses only L4 attributes; every rule
// with paths, methods or headers sits in a policy with targetRefs. [L7Attributes] checks that, and
// the tests run it over every generated policy.
package authz
