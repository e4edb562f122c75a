// Package forkpatch proves the documentation's fork patch: its test takes the Go blocks that
// docs/fork.md marks with <!-- forkpatch:NAME --> and compiles them, exactly as written, into a
// stand-in of the profiles controller (kubeflow/dashboard components/profile-controller: its
// ProfileReconciler, Plugin interface, Reconcile's finalizer branches, SetupWithManager and
// main.go), next to a Profile type of its own registered for kubeflow.org/v1. The README's copies
// of those blocks must equal them.
//
// Its other tests keep the rest of the documentation honest where a move could break it: every
// relative link of the README and docs/ resolves (anchors included), and an excerpt marked
// <!-- golden:PATH --> matches that golden file.
package forkpatch
