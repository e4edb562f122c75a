package runner

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

var (
	// ErrConflict is wrapped by every [ConflictError].
	ErrConflict = errors.New("object exists and was not made by this plugin")
)

// inputError marks err as an ErrInput without changing its message.
type inputError struct{ error }

func (e inputError) Unwrap() []error { return []error{e.error, plugin.ErrInput} }

// ConflictError says an object the plugin wants already exists but is not the plugin's: it is not
// marked as the plugin's, or it is marked so but the Profile does not control it. The runner leaves
// such an object alone: overwriting it would fight its real owner.
type ConflictError struct {
	Plugin string
	Ref    plugin.Ref
	// ManagedBy is what the object's labels say about who made it ("" when unmarked).
	ManagedBy string
	// NotControlled, when set, says what controls an object whose labels name this library
	// instead of the Profile (such as "it has no controller owner reference"): labels can be
	// copied, so they alone make nothing the plugin's.
	NotControlled string
}

func (e *ConflictError) who() string {
	if e.ManagedBy != "" {
		return e.ManagedBy
	}
	return "another writer"
}

// held says whose the object is, after "exists and".
func (e *ConflictError) held() string {
	if e.NotControlled != "" {
		return fmt.Sprintf("carries the labels of %s but is not controlled by the Profile (%s), so it is another writer's", e.who(), e.NotControlled)
	}
	return "was made by " + e.who()
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("plugin %s: %s exists and %s; it is left alone (delete or rename it to let the plugin create its own)",
		e.Plugin, e.Ref, e.held())
}

func (e *ConflictError) Unwrap() []error { return []error{ErrConflict, plugin.ErrInput} }

// Result reports one Runner.Apply or Runner.Revoke call.
type Result struct {
	// Plugins holds one entry per plugin, in the runner's order.
	Plugins []PluginResult
	// Errors are failures that belong to no single plugin, such as a namespace that cannot be read.
	Errors []error
	// WaitRequeue is the requeue delay used while a plugin is waiting.
	WaitRequeue time.Duration
}

// PluginResult is what happened for one plugin.
type PluginResult struct {
	Plugin string
	// Created, Updated, Unchanged and Deleted list the plugin's objects by what the call did.
	Created, Updated, Unchanged, Deleted []plugin.Ref
	// LabelsSet and LabelsRemoved list the namespace label keys the call changed.
	LabelsSet, LabelsRemoved []string
	// Waiting says what the plugin still waits for, in words an admin can act on.
	Waiting []string
	// Notes say how the plugin's state reads when it waits for nothing (plugin.Desired.Notes).
	Notes []string
	// RequeueAfter is the plugin's plugin.Desired.RequeueAfter: its decision changes by itself then.
	RequeueAfter time.Duration
	// Warnings come from the plugin and from the API server's responses to its writes.
	Warnings []string
	// Errors are the failures; a failed object or label does not stop the others.
	Errors []error
}

// Err joins every error of the call; nil when all succeeded.
func (r *Result) Err() error { return errors.Join(r.errors()...) }

// Retryable reports whether any error may go away on its own (an API error, a timeout): the
// controller should requeue with backoff. Input errors alone are not retryable.
func (r *Result) Retryable() bool {
	for _, err := range r.errors() {
		if !errors.Is(err, plugin.ErrInput) {
			return true
		}
	}
	return false
}

// Changed reports whether the call wrote anything.
func (r *Result) Changed() bool {
	for _, p := range r.Plugins {
		if len(p.Created)+len(p.Updated)+len(p.Deleted)+len(p.LabelsSet)+len(p.LabelsRemoved) > 0 {
			return true
		}
	}
	return false
}

// Waiting lists every plugin's waiting reasons, each prefixed with the plugin's name.
func (r *Result) Waiting() []string {
	return r.collect(func(p PluginResult) []string { return p.Waiting })
}

// Warnings lists every plugin's warnings, each prefixed with the plugin's name.
func (r *Result) Warnings() []string {
	return r.collect(func(p PluginResult) []string { return p.Warnings })
}

func (r *Result) collect(f func(PluginResult) []string) []string {
	var out []string
	for _, p := range r.Plugins {
		for _, s := range f(p) {
			out = append(out, p.Plugin+": "+s)
		}
	}
	return out
}

// Notes lists every plugin's notes, each prefixed with the plugin's name.
func (r *Result) Notes() []string {
	return r.collect(func(p PluginResult) []string { return p.Notes })
}

// RequeueAfter is how long the controller should wait before reconciling again: WaitRequeue while
// any plugin waits, else the soonest time a plugin's decision changes by itself (an idle
// waypoint's deadline), zero otherwise (errors are requeued by the controller's own backoff).
func (r *Result) RequeueAfter() time.Duration {
	var after time.Duration
	if len(r.Waiting()) > 0 {
		after = r.WaitRequeue
	}
	for _, p := range r.Plugins {
		if p.RequeueAfter > 0 && (after == 0 || p.RequeueAfter < after) {
			after = p.RequeueAfter
		}
	}
	return after
}

// Summary says whether every plugin reached its desired state, and what a status message says
// of the call: "all plugins applied" and the notes when it did, the errors, waiting reasons and
// notes, cut to a size a condition message may have, when it did not.
func (r *Result) Summary() (ready bool, message string) {
	var msgs []string
	for _, err := range r.errors() {
		msgs = append(msgs, err.Error())
	}
	msgs = append(msgs, r.Waiting()...)
	notes := r.Notes()
	if len(msgs) == 0 {
		return true, strings.Join(append([]string{"all plugins applied"}, notes...), "; ")
	}
	return false, capMessage(strings.Join(append(msgs, notes...), "; "))
}

func (r *Result) errors() []error {
	errs := append([]error(nil), r.Errors...)
	for _, p := range r.Plugins {
		errs = append(errs, p.Errors...)
	}
	return errs
}

// String is a one-line summary for logs.
func (r *Result) String() string {
	var parts []string
	for _, p := range r.Plugins {
		parts = append(parts, fmt.Sprintf("%s: created=%d updated=%d unchanged=%d deleted=%d labels+%d-%d waiting=%d errors=%d",
			p.Plugin, len(p.Created), len(p.Updated), len(p.Unchanged), len(p.Deleted),
			len(p.LabelsSet), len(p.LabelsRemoved), len(p.Waiting), len(p.Errors)))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// newResult is an empty Result with one entry per plugin, in the runner's order.
func (r *Runner) newResult() *Result {
	res := &Result{WaitRequeue: r.WaitRequeue}
	if res.WaitRequeue == 0 {
		res.WaitRequeue = DefaultWaitRequeue
	}
	for _, p := range r.Plugins {
		res.Plugins = append(res.Plugins, PluginResult{Plugin: p.Name()})
	}
	return res
}

// maxConditionMessage keeps the message under the 32768 characters metav1.Condition allows, with
// room for the note capMessage adds: pod names and their number are the tenant's choice.
const maxConditionMessage = 32000

// capMessage cuts msg to maxConditionMessage bytes, at a rune boundary, and says it did.
func capMessage(msg string) string {
	if len(msg) <= maxConditionMessage {
		return msg
	}
	cut := maxConditionMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + fmt.Sprintf(" ... (%d more bytes cut)", len(msg)-cut)
}
