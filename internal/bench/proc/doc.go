// Package proc is one implementation of the scale benchmark running in a process of its own, so its
// peak RSS and live heap are its own: the library wired as cmd/profile-plugins-controller wires it,
// the profiles controller's pattern (the baseline), or a floor of plain creates. The benchmark
// (internal/bench) starts it once per implementation and run, hands it a Spec, and reads back a
// Report: requests by verb and wall time of each pass, the informers it opened, and its memory.
package proc
