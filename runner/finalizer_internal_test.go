package runner

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

func TestStillRunning(t *testing.T) {
	t.Parallel()
	now := time.Now()
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "running"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "draining", DeletionTimestamp: at(time.Minute)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "past-its-grace", DeletionTimestamp: at(-time.Second)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "at-its-deadline", DeletionTimestamp: at(0)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "done"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
		{ObjectMeta: metav1.ObjectMeta{Name: "failed"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}},
	}
	got := stillRunning(pods, now)
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
		assert.Nil(t, p.DeletionTimestamp, "%s is presented as running", p.Name)
	}
	assert.Equal(t, []string{"running", "draining"}, names)
	assert.NotNil(t, pods[1].DeletionTimestamp, "the caller's pods are not changed")
	assert.Nil(t, stillRunning(nil, now), "not listed stays not listed")
}

func TestHandOverOps(t *testing.T) {
	t.Parallel()
	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{UID: "p1"}}
	pol := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{
		OwnerReferences: []metav1.OwnerReference{{UID: "other"}, {UID: "p1"}},
		Finalizers:      []string{"someone/else", plugin.ProtectionFinalizer},
	}}
	data, err := json.Marshal(handOverOps(pol, profile))
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"op":"test","path":"/metadata/ownerReferences/1/uid","value":"p1"},{"op":"remove","path":"/metadata/ownerReferences/1"},
		{"op":"test","path":"/metadata/finalizers/1","value":"`+plugin.ProtectionFinalizer+`"},{"op":"remove","path":"/metadata/finalizers/1"}
	]`, string(data), "only the Profile's reference and the runner's finalizer, each behind a test")

	assert.Empty(t, handOverOps(&istiosecurityv1.AuthorizationPolicy{}, profile), "nothing to hand over: no write")
	assert.Len(t, handOverOps(pol, &profilev1.Profile{}), 2, "a Profile without UID owns no reference; the finalizer still goes")
}
