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
//   - namespace labels are applied under the plugin's own field manager, so labels other writers set
//     survive and labels a plugin stops wanting disappear;
//   - what a plugin made earlier and no longer wants is deleted (pruned);
//   - nothing is written when the observed state already matches.
//
// # Safety model: a label only where its protection stands
//
// Each enrolment label requires protective objects ([Desired.LabelRequires]):
// istio.io/dataplane-mode=ambient requires the ztunnel policy; istio.io/use-waypoint and
// istio.io/ingress-use-waypoint require the owner policy, the ztunnel policy and a Programmed
// waypoint Gateway. A label is set, or kept, only while each requirement exists, carries its
// plugin's labels and is intact. Intact means its meaning, not its bytes: the desired fields hold
// their values (enums such as action: ALLOW are stated, not left to the zero value), and no other
// field manager owns a spec field the plugin does not set (an action, selector, targetRefs or extra
// rule on a policy; a class, listener or infrastructure on a Gateway). Such drift is restored to
// exactly the desired spec in the same call, with a warning naming the other manager, and a label
// already set stays only if the restore succeeds. A label is withdrawn only when a requirement is
// really gone, broken, or the label is no longer wanted; never because a plugin's generation failed
// (its observed objects count as what they are), a write failed while the earlier version still
// stands, or an unrelated object is in conflict. Data-plane labels ([DataPlane]) go last of all:
// removing one while pods it captures run would leave them outside every data plane, so it stays,
// with the objects it requires, until they are gone, and the runner says what it waits for.
//
// # Ordering: protect before enrolling
//
// One Apply runs in four phases across all plugins. First, enrolment labels that are going away
// or changing ([Desired.Enrolment], such as istio.io/use-waypoint) are withdrawn, so traffic never
// follows a label to policies that are about to be rewritten. Then every object is applied
// (policies protect), then namespace labels (labels enrol the namespace into a data plane), each
// gated as above, then stale objects are pruned. [Runner.Revoke] runs the other way round: routing
// labels first, then the objects behind them, and data-plane labels and the ztunnel policy last,
// once no pod depends on them (or left to garbage collection when the Profile controls the namespace).
//
// # Whose namespace
//
// Before anything else, Apply and Revoke check that the namespace is the Profile's under
// [Runner.Namespaces] (a [NamespacePolicy]): the Profile controls it, or its owner annotation
// names the Profile's owner, and its name is not reserved. Apply refuses any other namespace with
// a [NamespaceError] (an [ErrInput]) and writes nothing; Revoke leaves it alone and succeeds.
package plugin
