package plan

import "github.com/kubeflow-ambient/profile-plugins/platform"

// SchemaVersion is the version of the JSON document `-o json` prints. It changes only when a field
// is removed or changes meaning; new optional fields keep it.
const SchemaVersion = 1

// Report is the whole plan, and the JSON document `-o json` prints. Every list is sorted
// (namespaces by name, objects by kind and name, labels by key, findings by plugin and message)
// and, outside the -diff text (which shows owner UIDs), holds no timestamp or UID, so two plans
// of the same cluster state are byte-identical.
type Report struct {
	SchemaVersion int             `json:"schemaVersion"`
	Namespaces    []NamespacePlan `json:"namespaces"`
	// Platform are the findings of platform.Check: platform callers on another data
	// plane than configured, a missing ingress gateway, a waypoint that cannot start. Each breaks
	// traffic into every user namespace (exit status 2).
	Platform []platform.Finding `json:"platform,omitempty"`
	Summary  Summary            `json:"summary"`
}

// NamespacePlan is what one Profile's Apply would do to its namespace.
type NamespacePlan struct {
	Namespace string `json:"namespace"`
	Profile   string `json:"profile"`
	// Status is "unchanged" (nothing to write), "changes", "attention" (a conflict, refusal,
	// violation or breaking readiness issue; exit status 2) or "error" (the plan is incomplete;
	// exit status 1).
	Status  string         `json:"status"`
	Objects []ObjectChange `json:"objects,omitempty"`
	Labels  []LabelChange  `json:"labels,omitempty"`
	// Conflicts are objects another writer made under a managed name (left alone) and labels
	// another field manager also sets to a different value (forced, and it may set them back).
	Conflicts []Finding `json:"conflicts,omitempty"`
	// Refusals are what the runner would not do: a namespace that is not the Profile's, an
	// owner identity it cannot express, a Profile request beyond the admin's policy, a write the
	// API server rejects.
	Refusals []Finding `json:"refusals,omitempty"`
	// Violations are running pods the new enforce level would reject if they were created again.
	Violations []Finding `json:"violations,omitempty"`
	// Waiting is what the plugins would wait for after this apply.
	Waiting []Finding `json:"waiting,omitempty"`
	// Warnings come from the plugins and from the API server's answers to the dry-run writes.
	Warnings []Finding `json:"warnings,omitempty"`
	// Notes say how a plugin's state reads when it waits for nothing, such as "waypoint idle
	// since ..." with mesh.waypoint.provision onDemand.
	Notes []Finding `json:"notes,omitempty"`
	// Readiness lists objects already in the namespace that ambient mode ignores or breaks
	// (ambient mode only).
	Readiness []ReadinessFinding `json:"readiness,omitempty"`
	// Errors are failures that kept the plan of this namespace from being complete.
	Errors []Finding `json:"errors,omitempty"`
}

// ObjectChange is one object the apply would write.
type ObjectChange struct {
	// Action is create, update or delete.
	Action string `json:"action"`
	// Kind is Kind.group (Kind for the core group).
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Plugin string `json:"plugin"`
	// Note says more, such as "adopted from another writer".
	Note string `json:"note,omitempty"`
	// Diff is a unified diff of the object's YAML, before and after (with -diff only).
	Diff string `json:"diff,omitempty"`
}

// LabelChange is one namespace label the apply would change.
type LabelChange struct {
	// Action is add, change or remove.
	Action string `json:"action"`
	Key    string `json:"key"`
	// Old and New are the values before and after; absent when the label is.
	Old    *string `json:"old,omitempty"`
	New    *string `json:"new,omitempty"`
	Plugin string  `json:"plugin"`
}

// Finding is one message, with the plugin it comes from when there is one.
type Finding struct {
	Plugin  string `json:"plugin,omitempty"`
	Message string `json:"message"`
}

// ReadinessFinding is one object that ambient mode ignores or breaks.
type ReadinessFinding struct {
	// Kind is Kind.group; Name the object's name.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Severity is "breaks" (traffic or access fails after the move; exit status 2) or "review"
	// (ignored or redundant in ambient mode; check by hand).
	Severity string `json:"severity"`
	Reason   string `json:"reason"`
	Fix      string `json:"fix"`
}

// Summary counts the whole plan.
type Summary struct {
	Namespaces int `json:"namespaces"`
	// Unchanged, Changes, Attention and Error count namespaces by Status.
	Unchanged  int `json:"unchanged"`
	Changes    int `json:"changes"`
	Attention  int `json:"attention"`
	Error      int `json:"error"`
	Create     int `json:"create"`
	Update     int `json:"update"`
	Delete     int `json:"delete"`
	Labels     int `json:"labels"`
	Conflicts  int `json:"conflicts"`
	Refusals   int `json:"refusals"`
	Violations int `json:"violations"`
	Waiting    int `json:"waiting"`
	Readiness  int `json:"readiness"`
	Errors     int `json:"errors"`
	// Platform counts the platform findings.
	Platform int `json:"platform"`
}

// Status values of a NamespacePlan.
const (
	statusUnchanged = "unchanged"
	statusChanges   = "changes"
	statusAttention = "attention"
	statusError     = "error"
)

// Severities of a ReadinessFinding.
const (
	severityBreaks = "breaks"
	severityReview = "review"
)

// status decides the namespace's Status from its content.
func (n *NamespacePlan) status() string {
	switch {
	case len(n.Errors) > 0:
		return statusError
	case len(n.Conflicts)+len(n.Refusals)+len(n.Violations) > 0 || n.breaks():
		return statusAttention
	case len(n.Objects)+len(n.Labels) > 0:
		return statusChanges
	}
	return statusUnchanged
}

func (n *NamespacePlan) breaks() bool {
	for _, f := range n.Readiness {
		if f.Severity == severityBreaks {
			return true
		}
	}
	return false
}

// summarize fills r.Summary from the namespaces.
func (r *Report) summarize() {
	s := Summary{Namespaces: len(r.Namespaces)}
	for _, n := range r.Namespaces {
		switch n.Status {
		case statusUnchanged:
			s.Unchanged++
		case statusChanges:
			s.Changes++
		case statusAttention:
			s.Attention++
		case statusError:
			s.Error++
		}
		for _, o := range n.Objects {
			switch o.Action {
			case actionCreate:
				s.Create++
			case actionUpdate:
				s.Update++
			case actionDelete:
				s.Delete++
			}
		}
		s.Labels += len(n.Labels)
		s.Conflicts += len(n.Conflicts)
		s.Refusals += len(n.Refusals)
		s.Violations += len(n.Violations)
		s.Waiting += len(n.Waiting)
		s.Readiness += len(n.Readiness)
		s.Errors += len(n.Errors)
	}
	s.Platform = len(r.Platform)
	r.Summary = s
}

// exitStatus is 1 when any namespace could not be planned, 2 when any needs attention or the
// platform check found something, else 0.
func (r *Report) exitStatus() int {
	switch {
	case r.Summary.Error > 0:
		return exitError
	case r.Summary.Attention > 0 || r.Summary.Platform > 0:
		return exitAttention
	}
	return exitOK
}
