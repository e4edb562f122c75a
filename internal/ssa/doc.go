// Package ssa reads server-side apply's bookkeeping: objects as the maps an apply body is
// compared with, and the field sets of managedFields entries. The runner decides drift and
// ownership from what it answers; nothing here writes.
package ssa
