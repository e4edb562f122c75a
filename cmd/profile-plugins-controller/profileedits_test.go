package main

// A user edits their own Profile into something the plugins refuse: the namespace keeps what it
// had, and the condition says what was refused.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// An owner edit that authz refuses (a trailing space) must not unenrol the namespace: its
// policies still stand, so pods stay in ambient and behind the waypoint's owner policy.
func TestInvalidOwnerEditKeepsTheNamespaceEnrolled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	const ns = "safety-owner-edit"
	h.enrol(ns, "olivia@example.com")

	p := h.profile(ns)
	p.Spec.Owner.Name = "olivia@example.com "
	require.NoError(t, h.env.Client.Update(context.Background(), p))
	_, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}})
	require.ErrorIs(t, err, reconcile.TerminalError(nil), "an invalid owner is reported, never retried")

	labels := h.labels(ns)
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"])
	assert.Equal(t, "waypoint", labels["istio.io/use-waypoint"])
	assert.Equal(t, "true", labels["istio.io/ingress-use-waypoint"])
	assert.True(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio"))
	assert.True(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio-ztunnel"))
	cond := h.profile(ns).Status.Conditions[0]
	assert.Equal(t, "False", cond.Status)
	assert.Contains(t, cond.Message, "spec.owner.name")
}

// A user edits their own Profile to loosen Pod Security: the namespace keeps the admin's level,
// and the Profile's condition says what was refused, without a retry storm.
func TestProfileEditCannotLoosenPodSecurity(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const ns = "frank"
	createProfile(t, c, ns, "frank@example.com")
	h.reconcile(ns)
	require.Equal(t, "baseline", h.labels(ns)["pod-security.kubernetes.io/enforce"])

	p := h.profile(ns)
	p.Spec.Plugins = []profilev1.Plugin{{
		TypeMeta: metav1.TypeMeta{Kind: "PodSecurity"},
		Spec:     &runtime.RawExtension{Raw: []byte(`{"enforce":"privileged"}`)},
	}}
	require.NoError(t, c.Update(context.Background(), p))
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}})
	require.NoError(t, err, "a refused request is reported, not retried")
	assert.NotZero(t, res.RequeueAfter, "still waiting for the waypoint")
	assert.Equal(t, "baseline", h.labels(ns)["pod-security.kubernetes.io/enforce"])
	cond := h.profile(ns).Status.Conditions[0]
	assert.Equal(t, "False", cond.Status)
	assert.Contains(t, cond.Message, `profile "frank": spec.plugins[0].spec.enforce: level "privileged" refused`)
}
