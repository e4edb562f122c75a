// Package labelowners reads and encodes the runner's record of whose namespace labels are whose.
// The runner applies every plugin's labels in one server-side apply under
// [plugin.LabelFieldManager], together with [plugin.LabelOwnersAnnotation], a JSON object from
// plugin name to the label keys it owns. [Read] turns a namespace's managedFields and that
// annotation into a [Ledger], [Encode] writes the annotation, and [Managers] answers
// plugin.Observed.LabelManagers.
//
// The encoding lives apart from package ssa on purpose: ssa reads what server-side apply records
// for any field manager, while this package knows the runner's own managers and annotation, and
// the rule that ties them together (the annotation attributes only the keys the shared manager
// owns, and only while that manager owns the annotation too). What the runner does with a key the
// ledger names nobody for (a data-plane label goes to the plugin that declares it) is the
// runner's decision and stays in package runner.
package labelowners
