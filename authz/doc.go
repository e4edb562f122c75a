// Package authz is the access plugin: the AuthorizationPolicies that keep one Kubeflow user out of
// another user's namespace, in sidecar and ambient mode, plus the functions the access-management
// service (kfam) and migrations need.
//
// # Sidecar mode
//
// One policy, ns-owner-access-istio, with the rules the profiles controller has always written,
// built from the configured platform callers (config.Authorization.PlatformCallers): the ingress
// gateway and every caller on behalf of users (the Pipelines UI by default) may call in when the
// user-id header names the owner, the namespace may call itself, health paths are open, and every
// other caller may make the requests its entry allows (by default the notebook controller may GET
// kernels, and Katib's controller may reach the suggestion services it runs in the namespace).
// Each contributor gets a policy of its own (see [ContributorPolicy]), whose one rule is the same
// header rule for the contributor.
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
//   - each platform caller whose pods run sidecars (dataPlane "sidecar"), by its principal and
//     ports: sidecars never send through a waypoint, so its calls arrive straight at ztunnel,
//     which sees the sidecar's own identity (see sidecarCallers). Its methods and paths cannot be
//     checked there, and Generate warns what that lets it reach. A caller on behalf of users is
//     refused on sidecars by the configuration's validation: at L4 it would skip the header check;
//   - the admin's L4 exceptions, such as a monitoring namespace, or a scraper outside the mesh by
//     its ipBlocks (ztunnel compares them with the connection's source address).
//
// Once a namespace has any ALLOW policy, ztunnel denies everything else. Crucially it does not
// admit the ingress gateway: with istio.io/ingress-use-waypoint the ingress's requests arrive
// through the waypoint, and letting the ingress reach pods directly would let a request skip the
// owner's header check. The config validation refuses L4 exceptions that would admit it, or any
// caller on behalf of users.
//
// istiod's ENABLE_LAYERED_WAYPOINT_AUTHORIZATION_POLICIES must stay off (its default): with it,
// selector-less policies such as the ztunnel policy also apply in front of the waypoint, which
// then refuses the ingress gateway and the ambient callers (closed, not open). Admitting the ingress
// in the ztunnel policy instead would let it reach pods past the header check.
//
// Every policy without targetRefs that this package writes uses only L4 attributes; every rule
// with paths, methods or headers sits in a policy with targetRefs. [L7Attributes] checks that, and
// the tests run it over every generated policy.
//
// # Identities
//
// Every user id that reaches a header condition (the owner, each contributor, and the configured
// user-id prefix in front of them) passes config.ValidateIdentity, and so does the value the
// policy compares, prefix+user: no '*' at either end (Istio would read it as presence, suffix or
// prefix match), no invisible or format characters, no control characters or commas. The owner
// must be kind User: the owner policy matches one user id, which a Group does not have.
//
// # Contributors and kfam
//
// kfam, the access-management service behind the dashboard's "manage contributors", writes two
// objects per contributor (BindingClient.Create in kubeflow/dashboard
// components/access-management/kfam/bindings.go): first a RoleBinding named as
// [ContributorPolicyName] names it, annotated with user and role, binding ClusterRole
// kubeflow-<role> to the user; then it POSTs an AuthorizationPolicy of the same name and
// annotations, without targetRefs. Removing a contributor, it reads the RoleBinding and the policy,
// then deletes the RoleBinding and then the policy.
//
// With authorization.contributors "plugin" the RoleBinding is the only truth: the plugin reads the
// bindings (names and annotations only, see [ContributorsFrom]), writes each contributor's policy
// itself, with targetRefs in ambient mode, and takes over a policy kfam made under that name. It
// yields to kfam's own two requests, so that neither answers the dashboard with an error the
// plugin caused (AlreadyExists on the POST, NotFound on the DELETE), for
// authorization.kfamGracePeriod (default 10s): it creates no policy for a binding younger than
// that (kfam's POST comes first and is taken over), and when a binding goes it empties the policy
// kfam made (an ALLOW policy without rules, which admits no one) and leaves it for kfam's DELETE
// for that long before deleting it itself. A policy only the plugin ever wrote goes with its
// binding. No wait grants access: a contributor is admitted once the policy with the header rule
// exists and is refused as soon as the plugin sees the binding gone. The plugin decides from a
// cache, which can still show a binding kfam has just deleted while kfam's policy is already gone,
// or the reverse; the runner therefore never brings such a policy back: before it creates one
// (a name in Desired.Adopt), it lists the bindings on the API server and decides again, and an
// update of one names the UID it read, so an update that meets kfam's DELETE is refused instead
// of creating the policy anew (server-side apply would). kfam's re-add right after a removal
// then finds the name free.
//
// What a fork of kfam changes: stop writing contributor policies when the plugin writes them (or
// treat AlreadyExists on create and NotFound on delete as success); otherwise build the policy with
// [ContributorPolicy], which adds targetRefs and validates the user; refuse a user that
// config.ValidateIdentity refuses before creating the RoleBinding, so a "*" or an invisible
// character is refused in the dashboard instead of reported on the Profile; and, when listing
// contributors, require kfam's name as [ContributorsFrom] does, since kfam's List trusts the
// annotations of any binding.
//
// Names are kfam's byte for byte and never shortened: a contributor whose name would exceed 253
// characters gets no policy (kfam could not create it either) and an error naming the binding.
// Users that kfam folds to one name are a conflict and none of them is granted (see
// [ContributorPolicies]). A contributor policy the plugin did not make whose header value it would
// refuse (kfam's policy for a binding with user "*", which in sidecar mode admits everyone) is left
// alone, as another writer's object, and reported as an error that says to delete it.
package authz
