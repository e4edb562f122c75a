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
// # Ordering: protect before enrolling
//
// One Apply runs in four phases across all plugins. First, enrolment labels that are going away
// or changing ([Desired.Enrolment], such as istio.io/use-waypoint) are withdrawn, so traffic never
// follows a label to policies that are about to be rewritten. Then every object is applied
// (policies protect), then namespace labels (labels enrol the namespace into a data plane), then
// stale objects are pruned. A label may also name objects it requires ([Desired.LabelRequires]);
// the runner sets it only when every one of them exists, and otherwise withholds it and reports
// what it waits for. This is how istio.io/dataplane-mode=ambient waits for the ztunnel policy of
// another plugin. [Runner.Revoke] runs the other way round: labels go first, objects after.
//
// # Whose namespace
//
// Before anything else, Apply and Revoke check that the namespace is the Profile's under
// [Runner.Namespaces] (a [NamespacePolicy]): the Profile controls it, or its owner annotation
// names the Profile's owner, and its name is not reserved. Apply refuses any other namespace with
// a [NamespaceError] (an [ErrInput]) and writes nothing; Revoke leaves it alone and succeeds.
package plugin
