// Package dryrun runs the runner without persisting anything: [Client] sends every write as a
// server-side dry run (admission, validation and defaulting answer as for a real write) and
// overlays the server's answers on the reads that follow, so every phase of a run decides as it
// would after the real writes. [Apply] and [Revoke] hand a runner such a client and return what it
// would have written; the plan command is built on them.
package dryrun
