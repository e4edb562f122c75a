package pss_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/pss"
)

// Revoke keeps every label the plugin sets while pods run: dropping only a version would move the
// check to latest, and dropping enforce admits privileged pods.
func TestAdmissionLabelsAreEveryLabelThePluginSets(t *testing.T) {
	p, err := pss.New(config.Default())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{
		psaapi.EnforceLevelLabel, psaapi.EnforceVersionLabel, psaapi.AuditLevelLabel, psaapi.AuditVersionLabel,
		psaapi.WarnLevelLabel, psaapi.WarnVersionLabel,
	}, p.AdmissionLabels())
}

// Pods that finished or are being deleted hold nothing: the owner of a deleted pod that replaces
// it makes a pod that does.
func TestAdmittedNamesThePodsThatStillRun(t *testing.T) {
	p, err := pss.New(config.Default())
	require.NoError(t, err)
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web-2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
		{ObjectMeta: metav1.ObjectMeta{Name: "job"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
		{ObjectMeta: metav1.ObjectMeta{Name: "crashed"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}},
		{ObjectMeta: metav1.ObjectMeta{Name: "leaving", DeletionTimestamp: &metav1.Time{}}},
	}
	assert.Equal(t, []string{"web-1", "web-2"}, p.Admitted(pods))
	assert.Empty(t, p.Admitted(nil))
}
