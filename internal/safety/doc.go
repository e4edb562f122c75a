// Package safety holds the stateful property test of the runner with the full plugin set: a
// state machine (pgregory.net/rapid) drives Profile edits, configuration changes, foreign writers,
// API faults, waypoint readiness, pods and reconciles against controller-runtime's fake client,
// and after every step an evaluator that shares no code with the runner or the plugins checks
// that no user namespace is ever left open.
//
// The package has no API; everything is in its tests. Run the short form with
//
//	go test ./internal/safety/
//
// and the long one with `make fuzz` (10,000 sequences). FINDINGS.md lists the invariant
// violations the test found in the runner, each with its shrunk sequence.
package safety
