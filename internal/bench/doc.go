// Package bench measures what the plugins cost: generation time and allocations per namespace,
// and, against a real API server holding N namespaces full of other people's objects (package
// clutter), each implementation in a process of its own (package proc): the library wired as
// cmd/profile-plugins-controller wires it, and a baseline in the profiles controller's pattern
// caching what that controller caches. BenchmarkAPI reports each process's requests per namespace
// by verb and wall time per pass over three rotated runs, and its peak RSS and live heap.
// `make bench` and `make bench-scale` run it and write BENCHMARKS.md through internal/benchreport.
package bench
