// Package runner applies and revokes the plugins of package
// [github.com/kubeflow-ambient/profile-plugins/plugin] for one Profile at a time: it observes the
// Profile's namespace, runs every plugin's Generate on what it saw, and writes what they want in an
// order that never leaves a user namespace open. [New] builds a [Runner]; [Runner.Apply] and
// [Runner.Revoke] return a [Result] that says what happened and what is waited for; [Render]
// previews without an API server; [WithManager], [CacheOptions] and [WithWarnings] wire the
// runner into a controller-runtime manager.
//
// # One Apply, phase by phase
//
// Each phase is in the file named after it, and runs across all plugins, in the runner's order:
//
//   - admit: the namespace is the Profile's (see "Whose namespace" below), and the Profile has a UID;
//   - observe: the namespace, every object of the plugins' Kinds in it, and, without an
//     APIReader, its pods; each object is judged as below ("Whose object");
//   - generate: every plugin's Generate, its objects turned into apply bodies (managed labels,
//     the Profile as controller, the desired-hash annotation); with an APIReader, what a
//     decision needs that the Reader may not show, or shows trimmed ([Runner.Trimmed]), is read,
//     and the plugins generate again;
//   - plan: what can be decided before the first write: the enrolment labels that come off
//     first, and what the prune phase deletes and keeps;
//   - withdraw: enrolment labels that are going away or changing ([plugin.Desired.Enrolment],
//     such as istio.io/use-waypoint) come off, in one label write, so traffic never follows a
//     label to policies that are about to be rewritten; so do routing labels (enrolment labels
//     that are no data-plane label) that require an object the object phase is about to restore
//     from drift or, if status-gated ([plugin.Desired.ReadyFromStatus]), change: between that
//     write and istiod programming it, they would route to a version not in effect;
//   - objects: every object is written, with server-side apply under its plugin's field manager
//     (policies protect); an object that exists under a wanted name but is not the plugin's
//     own is a [ConflictError] and left alone;
//   - labels: the namespace labels of every plugin, each gated as below, in one write under
//     [plugin.LabelFieldManager], with [plugin.LabelOwnersAnnotation] saying which plugin owns
//     which, so labels other writers set survive, labels a plugin stops wanting go, and a failed
//     write changes none;
//   - prune: what a plugin made earlier and wants no more is deleted; protection comes down last.
//
// Nothing is written when the observed state already matches. Errors of one object or plugin are
// recorded in the Result and do not stop the others. The object and label phases decide as they
// go, because each decision depends on the writes before it. When the withdrawal fails, the label
// still routes traffic to the objects as they are: that call only creates missing objects,
// rewrites and prunes none, and the next reconcile retries in order. [Runner.Revoke] runs the
// other way round: routing labels first, then the objects behind them (none, if taking the labels
// off failed), and data-plane labels and the objects pods depend on last, once no pod depends on
// them (a pod being deleted counts until its grace period ends). Pod Security labels
// ([plugin.AdmissionGuard]) stay while pods run in a namespace that outlives its Profile. In a
// namespace that goes away anyway (being deleted, or controlled by the Profile) nothing waits:
// what pods depend on is left to the namespace's deletion, which removes pods first, and taken out
// of garbage collection's hands; [plugin.ProtectionFinalizer] keeps the objects a data-plane label
// requires there until their pods are gone (see finalizer.go).
//
// # Safety model: a label only where its protection stands
//
// Each enrolment label requires protective objects ([plugin.Desired.LabelRequires]):
// istio.io/dataplane-mode=ambient requires the ztunnel policy; istio.io/use-waypoint and
// istio.io/ingress-use-waypoint require the owner policy, the ztunnel policy, a Programmed
// waypoint Gateway and (with the seccomp patch) the ConfigMap istiod patches the waypoint with. A
// label is set, or kept, only while each requirement exists, is its plugin's own and is
// intact. Intact means its meaning, not its bytes: the desired fields hold their values (enums
// such as action: ALLOW are stated, not left to the zero value), and no other field manager owns
// a content field the plugin does not set (an action, selector, targetRefs or extra rule on a
// policy; a class, listener or infrastructure on a Gateway; a key of a ConfigMap's data). Labels
// and annotations of Istio's domain (istio.io/..., *.istio.io/...) are content too, kept exactly
// as the plugin's object says: istiod reads them (istio.io/rev=off or istio.io/dry-run=true
// switches a policy off; sidecar.istio.io/proxyImage on a Gateway picks the waypoint's image),
// so one another writer adds, changes or removes is drift; internal/ssa lists what istiod reads
// and why the domain is the rule. An apply under the plugin's own field manager name that adds
// such a field counts as another writer's: the API server ties no identity to a manager name.
// Such drift is restored to exactly the desired content in the same call, with a warning naming
// the other manager (or saying that none was recorded: a removal leaves none), and a label
// already set stays only if the restore succeeds; a label that is not a data-plane label
// (routing) is withheld for that call even then, because the control plane may still run the
// changed version, and set again by the next call. The same holds for an object the plugin
// judged ready by its status ([plugin.Desired.ReadyFromStatus]) and the runner changed in the call.
//
// A label is withdrawn only when a requirement is really gone, broken, restored from drift in the
// call, or the label is no longer wanted; never because a plugin's generation failed (its observed
// objects count as what they are), a write failed while the earlier version still stands, or an
// unrelated object is in conflict. Data-plane labels ([plugin.DataPlane]) go last of all: removing
// one while pods it captures run would leave them outside every data plane, so it stays, with the
// objects it requires, until they are gone, and the runner says what it waits for. Objects that
// running pods depend on whatever the labels say ([plugin.PodProtector]: the selector-less owner
// policy of pods that run a sidecar) are not pruned either while those pods run, after a switch to
// mode none or on Revoke. An object may also require others to be created
// ([plugin.Desired.CreateRequires]): the waypoint Gateway is created only once the owner policy
// protects, so a waypoint never serves without its policy.
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
// [Runner.Namespaces] (an [ownership.Policy]): the Profile controls it, or its owner annotation
// names the Profile's owner, and its name is not reserved. Apply refuses any other namespace with
// an [ownership.NamespaceError] (a [plugin.ErrInput]) and writes nothing; Revoke leaves it alone
// and succeeds.
//
// # Whose object
//
// An object is a plugin's own only when it carries the managed labels ([plugin.ManagedByLabel],
// [plugin.PluginLabel]) and the Profile is its controller: an owner reference to a Profile (any
// version of kubeflow.org) with the Profile's UID, which the runner sets on everything it writes,
// as every release of this library has. Labels alone prove nothing: anyone who may create objects
// in the namespace can copy them. An object with the labels and another controller, or none, is
// another writer's: the runner shows it to the plugins and to its own phases without those
// labels, so it is never pruned, restored over or adopted, and never counts as protection; each
// call names it in a warning, and under a wanted name it is a [ConflictError] that withholds what
// requires it while the rest of the call goes on. Once it is deleted, the next call makes the
// plugin's own. A Profile deleted and created again under its name has a new UID: what the runner
// made for the earlier one is another writer's until garbage collection deletes it (in a
// namespace the earlier Profile controls, Apply refuses the namespace instead).
package runner
