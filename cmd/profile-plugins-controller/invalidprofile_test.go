package main

// Profiles the API server accepts but no namespace can follow: the condition says which field is
// wrong and why, the reconcile is terminal (no retry with backoff), and nothing is made for them.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
)

// A Profile is cluster-scoped, so the API server accepts "team.a" (a DNS-1123 subdomain), but no
// namespace may have that name. The controller used to try to create the namespace, fail on the
// API server's validation and return that error before the runner ran: no condition, and the log
// repeated the error with backoff forever.
func TestAProfileWhoseNameCannotBeANamespaceGetsATerminalCondition(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	const name = "team.a"
	createProfile(t, h.env.Client, name, "alice@example.com")

	for range 2 {
		_, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
		require.ErrorIs(t, err, reconcile.TerminalError(nil), "an input error is reported, never retried")
	}
	conds := h.profile(name).Status.Conditions
	require.Len(t, conds, 1, "the Profile says why")
	assert.Equal(t, kubeflow.ConditionType, conds[0].Type)
	assert.Equal(t, "False", conds[0].Status)
	assert.Contains(t, conds[0].Message, `metadata.name: Invalid value: "team.a"`)
	assert.Contains(t, conds[0].Message, "must be a DNS-1123 label: must not contain dots")
	assert.False(t, h.exists(&corev1.Namespace{}, "", name))
}

// The Profile CRD accepts spec.owner.name "". The controller used to make the namespace with an
// empty owner annotation and enrol it, while the admission guard manages only namespaces whose
// owner annotation is not empty (guard/guard.go managed): the runner protected a namespace the
// guard did not. Now such a Profile is an input error naming spec.owner.name, and neither a
// namespace nor anything in it is made for it.
func TestAProfileWithoutAnOwnerGetsATerminalConditionAndNoNamespace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	const name = "ownerless"
	createProfile(t, h.env.Client, name, "")
	require.Empty(t, h.profile(name).Spec.Owner.Name, "the API server accepts it")

	for range 2 {
		_, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
		require.ErrorIs(t, err, reconcile.TerminalError(nil), "an input error is reported, never retried")
	}
	conds := h.profile(name).Status.Conditions
	require.Len(t, conds, 1)
	assert.Equal(t, "False", conds[0].Status)
	assert.Contains(t, conds[0].Message, "spec.owner.name: Required value")
	assert.False(t, h.exists(&corev1.Namespace{}, "", name), "no namespace is made for a Profile without an owner")
}
