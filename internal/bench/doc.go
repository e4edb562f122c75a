// Package bench measures what the plugins cost: generation time and allocations per namespace, and
// API requests per namespace against a real API server, side by side with a baseline written in
// the profiles controller's style and a floor of plain creates. `make bench` runs it and writes
// BENCHMARKS.md; see that file for the numbers and the command.
package bench
