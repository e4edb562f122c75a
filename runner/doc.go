// Package plugin is the contract between the Kubeflow profiles controller and the generators in
// this module (waypoint, authz, pss), and the runner that writes what they generate.
//
// A [Plugin] is pure: given a [Target] (the namespace, its Profile and the state the runner observed)
// it returns a [Desired]: typed objects and the namespace labels it owns. The [Runner] turns that into
// API calls that are safe to repeat:
//
//   - objects are written with server-side apply, one field manager per plugin, each labelled with
//     [ManagedByLabel] and [PluginLabel] and controlled by the Profile;
//   - an object that exists under a managed name but was not made by the plugin is reported as a
//     [ConflictError] and left alone;
//   - namespace labels of every plugin are applied together under [LabelFieldManager] (one write
//     per call, and one more first when enrolment labels are withdrawn), with
//     [LabelOwnersAnnotation] saying which plugin owns which, so labels other writers set survive,
//     labels a plugin stops wanting disappear, and a failed write changes none;
//   - what a plugin made earlier and no longer wants is deleted (pruned);
//   - nothing is written when the observed state already matches.
//
// # Safety model: a label only where its protection stands
//
// Each enrolment label requires protective objects ([Desired.LabelRequires]):
// istio.io/dataplane-mode=ambient requires the ztunnel policy; istio.io/use-waypoint and
// istio.io/ingress-use-waypoint require the owner policy, the ztunnel policy, a Programmed
// waypoint Gateway and (with the seccomp patch) the ConfigMap istiod patches the waypoint with. A label is set, or kept, only while each requirement exists, carries its
// plugin's labels and is intact. Intact means its meaning, not its bytes: the desired fields hold
// their values (enums such as action: ALLOW are stated, not left to the zero value), and no other
// field manager owns a content field the plugin does not set (an action, selector, targetRefs or
// extra rule on a policy; a class, listener or infrastructure on a Gateway; a key of a ConfigMap's
// data; an istio.io/dry-run annotation, which switches a policy off). Such drift is restored to
// exactly the desired spec in the same call, with a warning naming the other manager, and a label
// already set stays only if the restore succeeds; a label that is not a data-plane label (routing)
// is withheld for that call even then, because the control plane may still run the changed
// version, and set again by the next call. A label is withdrawn only when a requirement is
// really gone, broken, restored from drift in the call, or the label is no longer wanted; never because a plugin's generation failed
// (its observed objects count as what they are), a write failed while the earlier version still
// stands, or an unrelated object is in conflict. Data-plane labels ([DataPlane]) go last of all:
// removing one while pods it captures run would leave them outside every data plane, so it stays,
// with the objects it requires, until they are gone, and the runner says what it waits for.
// Objects that running pods depend on whatever the labels say ([PodProtector]: the selector-less
// owner policy of pods that run a sidecar) are not pruned either while those pods run, after a
// switch to mode none or on Revoke. An object may also require others to be created
// ([Desired.CreateRequires]): the waypoint Gateway is created only once the owner policy protects,
// so a waypoint never serves without its policy.
//
// # Transitions: one data plane stays until the next one is in place
//
// A switch between data planes never leaves a pod, running or new, in none, nor without an ALLOW
// policy. From sidecar to ambient the plugins move one step per reconcile, each requeued by
// Waiting: the ztunnel policy and istio.io/dataplane-mode=ambient first, with sidecar injection
// still on (a pod with both runs its sidecar) and the owner policy still applying to the pods;
// once the ztunnel policy is observed in place, the owner policy moves to the waypoint (sidecars
// are then held by the ztunnel policy, which admits less) and injection goes off; then the
// waypoint Gateway is made, and routed to once Programmed. From ambient to sidecar, the data-plane
// label and the ztunnel policy stay while pods without a sidecar run.
//
// # Ordering: protect before enrolling
//
// One Apply runs in four phases across all plugins. First, enrolment labels that are going away
// or changing ([Desired.Enrolment], such as istio.io/use-waypoint) are withdrawn, so traffic never
// follows a label to policies that are about to be rewritten. Then every object is applied
// (policies protect), then namespace labels (labels enrol the namespace into a data plane), each
// gated as above, then stale objects are pruned. When a withdrawal fails, the label still routes
// traffic to the objects as they are: that call only creates missing objects, rewrites and prunes
// none, and the next reconcile retries in order. [Runner.Revoke] runs the other way round: routing
// labels first, then the objects behind them (none, if taking the labels off failed), and
// data-plane labels and the objects pods depend on last, once no pod depends on them (or left to
// garbage collection when the Profile controls the namespace).
//
// # Kinds the API server does not serve
//
// A kind of a plugin's Kinds whose CRD is not installed has no objects: the runner observes it as
// empty, so a mode that writes none of it works on a cluster without that CRD (sidecar mode
// without the Gateway API). A plugin that wants to write such a kind fails as a whole, with a
// retryable error naming the CRD, and so sets none of its labels. The runner finds out on every
// call, through the List and the client's RESTMapper: a CRD installed later is used at once, and
// one removed later counts as not served.
//
// # Whose namespace
//
// Before anything else, Apply and Revoke check that the namespace is the Profile's under
// [Runner.Namespaces] (a [ownership.Policy]): the Profile controls it, or its owner annotation
// names the Profile's owner, and its name is not reserved. Apply refuses any other namespace with
// a [ownership.NamespaceError] (an [ErrInput]) and writes nothing; Revoke leaves it alone and succeeds.
package runner
