package plan

import (
	"fmt"
	"io"
	"strings"

	"github.com/kubeflow-ambient/profile-plugins/platform"
)

// statusWords say each Status in the text output.
var statusWords = map[string]string{
	statusUnchanged: "nothing to write",
	statusChanges:   "changes",
	statusAttention: "needs attention",
	statusError:     "plan incomplete",
}

// writeText prints the plan for people: one block per namespace, then the summary line.
func writeText(w io.Writer, r *Report) error {
	tw := &textWriter{w: w}
	tw.platform(r.Platform)
	for i := range r.Namespaces {
		tw.namespace(&r.Namespaces[i])
	}
	tw.summary(r.Summary)
	return tw.err
}

// textWriter keeps the first write error, so the printers stay linear.
type textWriter struct {
	w   io.Writer
	err error
}

func (t *textWriter) printf(format string, args ...any) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.w, format, args...)
	}
}

func (t *textWriter) namespace(n *NamespacePlan) {
	t.printf("namespace %s: %s\n", n.Namespace, statusWords[n.Status])
	t.objects(n.Objects)
	t.labels(n.Labels)
	t.findings("conflicts", "!", n.Conflicts)
	t.findings("refusals", "!", n.Refusals)
	t.findings("violations", "!", n.Violations)
	t.readiness(n.Readiness)
	t.findings("waiting", "…", n.Waiting)
	t.findings("warnings", "*", n.Warnings)
	t.findings("notes", "-", n.Notes)
	t.findings("errors", "x", n.Errors)
	t.printf("\n")
}

var actionSigns = map[string]string{actionCreate: "+", actionAdd: "+", actionUpdate: "~", actionChange: "~", actionDelete: "-", actionRemove: "-"}

func (t *textWriter) objects(objs []ObjectChange) {
	if len(objs) == 0 {
		return
	}
	t.printf("  objects:\n")
	for _, o := range objs {
		note := o.Plugin
		if o.Note != "" {
			note += "; " + o.Note
		}
		t.printf("    %s %s %s/%s (%s)\n", actionSigns[o.Action], o.Action, o.Kind, o.Name, note)
		if o.Diff != "" {
			t.printf("%s", indent(o.Diff, "      "))
		}
	}
}

func (t *textWriter) labels(labels []LabelChange) {
	if len(labels) == 0 {
		return
	}
	t.printf("  labels:\n")
	for _, l := range labels {
		var what string
		switch l.Action {
		case actionAdd:
			what = fmt.Sprintf("%s=%s", l.Key, *l.New)
		case actionChange:
			what = fmt.Sprintf("%s: %s -> %s", l.Key, *l.Old, *l.New)
		default:
			what = fmt.Sprintf("%s (was %s)", l.Key, *l.Old)
		}
		t.printf("    %s %s %s (%s)\n", actionSigns[l.Action], l.Action, what, l.Plugin)
	}
}

func (t *textWriter) findings(title, sign string, fs []Finding) {
	if len(fs) == 0 {
		return
	}
	t.printf("  %s:\n", title)
	for _, f := range fs {
		if f.Plugin != "" {
			t.printf("    %s %s: %s\n", sign, f.Plugin, f.Message)
		} else {
			t.printf("    %s %s\n", sign, f.Message)
		}
	}
}

func (t *textWriter) readiness(fs []ReadinessFinding) {
	if len(fs) == 0 {
		return
	}
	t.printf("  ambient readiness:\n")
	for _, f := range fs {
		sign := "!"
		if f.Severity == severityReview {
			sign = "?"
		}
		t.printf("    %s %s %s/%s: %s\n      fix: %s\n", sign, f.Severity, f.Kind, f.Name, f.Reason, f.Fix)
	}
}

// platform prints the platform check's findings, which concern every namespace, first.
func (t *textWriter) platform(fs []platform.Finding) {
	if len(fs) == 0 {
		return
	}
	t.printf("platform: needs attention\n")
	for _, f := range fs {
		t.printf("    ! %s: %s (%s): %s\n      fix: %s\n", f.Kind, f.What, f.Subject(), f.Problem, f.Fix)
	}
	t.printf("\n")
}

func (t *textWriter) summary(s Summary) {
	t.printf("Plan: %d namespace(s): %d unchanged, %d with changes, %d need attention, %d incomplete.\n",
		s.Namespaces, s.Unchanged, s.Changes, s.Attention, s.Error)
	t.printf("Writes: %d to create, %d to update, %d to delete, %d label(s) to change.\n", s.Create, s.Update, s.Delete, s.Labels)
	t.printf("Findings: %d conflict(s), %d refusal(s), %d violation(s), %d readiness issue(s), %d waiting, %d error(s).\n",
		s.Conflicts, s.Refusals, s.Violations, s.Readiness, s.Waiting, s.Errors)
	if s.Platform > 0 {
		t.printf("Platform: %d finding(s), listed first.\n", s.Platform)
	}
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}
