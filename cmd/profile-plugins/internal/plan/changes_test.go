package plan

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Each kind of runner error lands where the admin looks for it, and decides the exit status.
func TestErrorsAreClassified(t *testing.T) {
	gk := schema.GroupKind{Group: "security.istio.io", Kind: "AuthorizationPolicy"}
	for _, c := range []struct {
		name   string
		err    error
		where  func(*NamespacePlan) []Finding
		status string
	}{
		{"conflict", &runner.ConflictError{Plugin: "authz", Ref: plugin.Ref{GroupKind: gk, Name: "x"}},
			func(n *NamespacePlan) []Finding { return n.Conflicts }, statusAttention},
		{"refused namespace", &ownership.NamespaceError{Namespace: "a", Profile: "a", Rule: "no"},
			func(n *NamespacePlan) []Finding { return n.Refusals }, statusAttention},
		{"admission says no", apierrors.NewInvalid(gk, "x", field.ErrorList{field.Invalid(field.NewPath("spec"), 1, "bad")}),
			func(n *NamespacePlan) []Finding { return n.Refusals }, statusAttention},
		{"webhook without dry run", apierrors.NewBadRequest(`admission webhook "audit.example.com" does not support dry run`),
			func(n *NamespacePlan) []Finding { return n.Errors }, statusError},
		{"timeout", fmt.Errorf("applying: %w", apierrors.NewTimeoutError("slow", 1)),
			func(n *NamespacePlan) []Finding { return n.Errors }, statusError},
		{"plain", errors.New("boom"), func(n *NamespacePlan) []Finding { return n.Errors }, statusError},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := &NamespacePlan{}
			addError(n, "authz", c.err)
			assert.Len(t, c.where(n), 1)
			assert.Equal(t, c.status, n.status())
		})
	}
}
