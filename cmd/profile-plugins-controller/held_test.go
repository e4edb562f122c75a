package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// An admin deletes the ztunnel policy of an enrolled namespace without pods: the finalizer keeps
// it in force while the plugin wants it, so `kubectl delete` waits. The Profile's condition says
// it is held, by which finalizer and why, and an event says it once.
func TestAHeldZtunnelPolicyIsInTheConditionAndAnEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	const ns = "held"
	h.enrol(ns, "holly@example.com")
	rec := events.NewFakeRecorder(100)
	h.r.Recorder = rec
	ztunnel := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, h.env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ns-owner-access-istio-ztunnel"}, ztunnel))
	require.Contains(t, ztunnel.Finalizers, plugin.ProtectionFinalizer)
	require.NoError(t, h.env.Client.Delete(context.Background(), ztunnel))

	h.reconcile(ns)
	h.reconcile(ns)
	cond := h.profile(ns).Status.Conditions[0]
	assert.Equal(t, "True", cond.Status, "it still applies")
	assert.Contains(t, cond.Message, "ns-owner-access-istio-ztunnel is held: it was deleted, but finalizer "+plugin.ProtectionFinalizer)
	assert.Contains(t, cond.Message, "istio.io/dataplane-mode=ambient requires it")
	var said []string
	for len(rec.Events) > 0 {
		said = append(said, <-rec.Events)
	}
	assert.Len(t, said, 1, "one event, not one per reconcile: %v", said)
	assert.Contains(t, strings.Join(said, "\n"), "is being deleted although plugin authz wants it")
	assert.True(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio-ztunnel"), "held")
}
