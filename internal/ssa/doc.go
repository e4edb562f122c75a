// Package ssa reads server-side apply's bookkeeping for the runner: objects as the maps an apply
// body is compared with ([ToMap], [Holds], [Contains]), and the managedFields of an object as the
// fields each field manager owns. [ForeignFields] and [ApplyExtras] find content (spec, data,
// binaryData, and the annotations that switch a policy off) that someone other than the runner's
// own apply holds, and [RestoredBody] builds the Update that takes it away. The runner decides drift,
// intactness and ownership from what this package answers; nothing here writes, and nothing here
// knows a plugin.
package ssa
