// Package plan is `profile-plugins plan`: a preview of a rollout of the plugins against a live
// cluster, like `terraform plan` or `kubectl diff`. For every Profile it runs exactly what the
// profiles controller's Apply would run, through runner/dryrun, so every write is a server-side
// dry run that admission, Pod Security and CRD validation answer as they would, and nothing is
// persisted. It prints, per namespace, the objects to create, update or delete, the labels to add,
// change or remove, conflicts, refusals, pods the new enforce level would reject, what the plugins
// would wait for, and the namespace's readiness for ambient mode; before the namespaces, the
// platform check's findings.
//
// Exit status: 0 when nothing needs attention (changes and waits alone do not), 2 when some
// namespace has a conflict, a refusal, a violating pod or an ambient readiness issue that breaks
// traffic, or the platform check found something, 1 when the plan could not be made. The JSON
// document of -o json is [Report]; its schema changes only with [SchemaVersion].
package plan
