package runner_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// The Profile CRD accepts spec.owner.name "", and the profiles controller then makes the namespace
// with an empty owner annotation and the Profile as controller. The admission guard manages only
// namespaces whose owner annotation is not empty (guard/guard.go managed), so the runner must not
// enrol such a namespace: it would route and label a namespace whose protection anyone with
// namespace rights could take apart. The namespace is refused, and nothing is written.
func TestANamespaceWithAnEmptyOwnerAnnotationIsNeverEnrolled(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.controlledByProfile()
	m.editNamespace("", func(n *corev1.Namespace) { n.Annotations[ownership.OwnerAnnotation] = "" })
	ownerless := testProfile()
	ownerless.Spec.Owner.Name = ""

	m.writes = nil
	res := m.runner.Apply(context.Background(), ownerless)
	var nsErr *ownership.NamespaceError
	require.ErrorAs(t, res.Err(), &nsErr)
	assert.Contains(t, nsErr.Rule, `"owner" annotation is empty`)
	assert.Contains(t, nsErr.Rule, "spec.owner.name")
	assert.True(t, errors.Is(res.Err(), plugin.ErrInput), "an input error: terminal, never retried")
	ready, _ := res.Summary()
	assert.False(t, ready)
	assert.Empty(t, m.writes, "nothing is written into a namespace the guard does not manage")
	assert.Empty(t, m.labels())
}

// A Profile without an owner whose namespace does not exist is an input error naming
// spec.owner.name, not a wait for a namespace no controller should make.
func TestAProfileWithoutAnOwnerAndNoNamespaceIsAnInputError(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	require.NoError(t, m.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	ownerless := testProfile()
	ownerless.Spec.Owner.Name = ""

	m.writes = nil
	res := m.runner.Apply(context.Background(), ownerless)
	require.Error(t, res.Err())
	assert.Contains(t, res.Err().Error(), "spec.owner.name: Required value")
	assert.False(t, res.Retryable(), "an input error: terminal, never retried")
	assert.Empty(t, m.writes)
}

// An owner edited away from an enrolled namespace (its annotation still names the owner, so the
// guard protects it) keeps the namespace enrolled and protected: the authz plugin refuses the
// owner, and the previous owner's rule goes with it.
func TestAnOwnerEditedAwayKeepsTheNamespaceEnrolled(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.controlledByProfile()
	m.enrol()
	ownerless := testProfile()
	ownerless.Spec.Owner.Name = ""

	res := m.runner.Apply(context.Background(), ownerless)
	require.Error(t, res.Err())
	assert.Contains(t, res.Err().Error(), "spec.owner.name")
	enrolled(t, m.labels())
	assert.NotContains(t, fmt.Sprint(m.policy(ownerName).Spec.GetRules()), "alice@example.com", "the previous owner's rule goes")
}
