package platform

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"istio.io/api/label"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// A namespace asks for sidecars with injection enabled, or with a revision label unless injection
// is disabled; then for ambient with the data-plane label; else for nothing.
func TestNamespaceDataPlane(t *testing.T) {
	t.Parallel()
	rev, ambient := label.IoIstioRev.Name, label.IoIstioDataplaneMode.Name
	for _, c := range []struct {
		labels map[string]string
		want   dataPlane
	}{
		{map[string]string{waypoint.InjectionLabel: "enabled", ambient: "ambient"}, planeSidecar},
		{map[string]string{rev: "1-24", ambient: "ambient"}, planeSidecar},
		{map[string]string{waypoint.InjectionLabel: "disabled", rev: "1-24"}, planeNone},
		{map[string]string{waypoint.InjectionLabel: "disabled", ambient: "ambient"}, planeAmbient},
		{map[string]string{ambient: "ambient"}, planeAmbient},
		{map[string]string{ambient: "none"}, planeNone},
		{nil, planeNone},
	} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: c.labels}}
		assert.Equal(t, c.want, namespaceDataPlane(ns), "%v", c.labels)
	}
}

// A caller whose dataPlane is unset is taken as ambient.
func TestJudgeCallerTakesAnUnsetDataPlaneAsAmbient(t *testing.T) {
	t.Parallel()
	caller := config.PlatformCaller{Name: "pipelines"}
	_, found := judgeCaller(Finding{}, config.ModeAmbient, caller, observation{plane: planeAmbient})
	assert.False(t, found, "an ambient caller configured with no dataPlane")
	f, found := judgeCaller(Finding{}, config.ModeAmbient, caller, observation{plane: planeSidecar, evidence: "pod a"})
	assert.True(t, found)
	assert.Equal(t, FindingDataPlaneMismatch, f.Kind)
}

// istiod uses the oldest class defaults ConfigMap, by creation time, then by name.
func TestOlderFirst(t *testing.T) {
	t.Parallel()
	at := func(name string, sec int64) corev1.ConfigMap {
		return corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Unix(sec, 0)}}
	}
	assert.Negative(t, olderFirst(at("z", 1), at("a", 2)), "older wins over its name")
	assert.Positive(t, olderFirst(at("a", 2), at("z", 1)))
	assert.Negative(t, olderFirst(at("a", 1), at("b", 1)), "same time: by name")
	assert.Positive(t, olderFirst(at("b", 1), at("a", 1)))
	assert.Zero(t, olderFirst(at("a", 1), at("a", 1)))
}

// An ipBlocks entry that does not parse is validation's to refuse; the check skips it and still
// judges the next one.
func TestIPBlocksCoveringForwardersSkipsAnInvalidBlock(t *testing.T) {
	t.Parallel()
	gateway := trustedPrincipal{namespace: "istio-system", principal: "gw", pods: []corev1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "gw-1"}, Status: corev1.PodStatus{PodIP: "10.0.0.5", PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}}}}}
	got := ipBlocksCoveringForwarders([]config.L4Exception{{IPBlocks: []string{"not-a-block", "10.0.0.0/24"}}}, []trustedPrincipal{gateway})
	if assert.Len(t, got, 1) {
		assert.Equal(t, FindingIPBlockCoversForwarder, got[0].Kind)
		assert.Contains(t, got[0].Problem, "authorization.l4Exceptions[0].ipBlocks[1]")
	}
}

func TestFindingSubjectNamesWhatIsSet(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "namespace ns", Finding{Namespace: "ns"}.Subject())
	assert.Equal(t, "namespace ns, principal p, ConfigMap cm", Finding{Namespace: "ns", Principal: "p", ConfigMap: "cm"}.Subject())
}
