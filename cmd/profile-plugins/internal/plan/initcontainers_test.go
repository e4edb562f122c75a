package plan

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

func containers(names ...string) []corev1.Container {
	var out []corev1.Container
	for _, n := range names {
		out = append(out, corev1.Container{Name: n})
	}
	return out
}

// nativeProxy is istio-proxy as Istio injects a native sidecar: an init container that keeps
// running.
func nativeProxy() corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	return corev1.Container{Name: proxyContainer, RestartPolicy: &always}
}

func pod(name string, spec corev1.PodSpec) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

// Each pod whose own init containers run without its sidecar is reported, and only those: Istio's
// own init containers and those after a native sidecar are not, nor pods without a sidecar.
func TestInitContainersBeforeTheSidecarAreReported(t *testing.T) {
	afterNative := pod("after-native", corev1.PodSpec{
		InitContainers: append([]corev1.Container{{Name: "istio-validation"}, nativeProxy()}, containers("fetch")...),
		Containers:     containers("main")})
	beforeNative := pod("before-native", corev1.PodSpec{
		InitContainers: append(containers("early"), nativeProxy(), corev1.Container{Name: "late"}),
		Containers:     containers("main")})
	classic := pod("classic", corev1.PodSpec{
		InitContainers: containers("istio-init", "fetch-artifacts", "build"),
		Containers:     containers("main", proxyContainer)})
	classicNoInit := pod("classic-no-init", corev1.PodSpec{InitContainers: containers("istio-init"), Containers: containers("main", proxyContainer)})
	noSidecar := pod("no-sidecar", corev1.PodSpec{InitContainers: containers("fetch"), Containers: containers("main")})
	// A restartable init container that is not Istio's proxy is not a sidecar of the mesh.
	otherNative := nativeProxy()
	otherNative.Name = "log-shipper"
	notIstio := pod("not-istio", corev1.PodSpec{InitContainers: []corev1.Container{otherNative, {Name: "fetch"}}, Containers: containers("main")})

	got := initContainerFindings([]corev1.Pod{afterNative, beforeNative, classic, classicNoInit, noSidecar, notIstio}, "waypoint")
	require.Len(t, got, 2)
	assert.Equal(t, "before-native", got[0].Name)
	assert.Contains(t, got[0].Reason, "init container(s) early run before the native sidecar")
	assert.NotContains(t, got[0].Reason, "late")
	assert.Equal(t, "classic", got[1].Name)
	assert.Contains(t, got[1].Reason, "fetch-artifacts, build run before the classic (non-native) sidecar")
	for _, f := range got {
		assert.Equal(t, "Pod", f.Kind)
		assert.Equal(t, severityReview, f.Severity, "a step may make no connection: review, not breaks")
		assert.Contains(t, f.Fix, "ENABLE_NATIVE_SIDECARS")
	}
}

// The waypoint's pods run Istio's proxy in a container named istio-proxy but are no sidecar pods:
// an init container that the class defaults or a Profile's sizing give them is not reported as
// running before a sidecar, while a member's pod that only looks like one in part is.
func TestWaypointPodsAreNotJudgedAsSidecarPods(t *testing.T) {
	cfg := config.Default()
	own := fixture.WaypointPod(cfg, "alice", "waypoint-5d9f")
	own.Spec.InitContainers = containers("fetch-certs")
	lookalike := own.DeepCopy()
	lookalike.Name, lookalike.Spec.ServiceAccountName = "lookalike", "default-editor"

	got := initContainerFindings([]corev1.Pod{*own, *lookalike}, cfg.Mesh.Waypoint.Name)
	require.Len(t, got, 1)
	assert.Equal(t, "lookalike", got[0].Name)
}

// The text output heads pod findings as the sidecar readiness they are.
func TestSidecarReadinessIsHeadedSo(t *testing.T) {
	var out bytes.Buffer
	w := &textWriter{w: &out}
	w.readiness(initContainerFindings([]corev1.Pod{pod("classic", corev1.PodSpec{
		InitContainers: containers("fetch"), Containers: containers("main", proxyContainer)})}, "waypoint"))
	require.NoError(t, w.err)
	assert.Contains(t, out.String(), "  sidecar readiness:\n    ? review Pod/classic: init container(s) fetch run before")
	out.Reset()
	w.readiness([]ReadinessFinding{{Kind: "Service", Name: "s", Severity: severityBreaks}})
	assert.Contains(t, out.String(), "  ambient readiness:\n")
}

// The plan of a sidecar-mode namespace on a real API server lists its pod whose init container
// runs before the classic sidecar, under "sidecar readiness", and the JSON report carries it.
func TestSidecarPlanListsInitContainersBeforeTheSidecar(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	createProfile(t, c, "builds")
	require.NoError(t, c.Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "build-1", Namespace: "builds"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "istio-init", Image: "proxyv2"}, {Name: "fetch-artifacts", Image: "curl"}},
			Containers:     []corev1.Container{{Name: "build", Image: "builder"}, {Name: proxyContainer, Image: "proxyv2"}}}}))
	opts := options{configPath: writeConfig(t, "mesh:\n  mode: sidecar\n"), profiles: []string{"builds"}}
	text, _ := planOutput(t, env.Base, opts)
	assert.Contains(t, text, "  sidecar readiness:\n    ? review Pod/build-1: init container(s) fetch-artifacts run before the classic (non-native) sidecar")
	opts.output = "json"
	js, _ := planOutput(t, env.Base, opts)
	r := decodeReport(t, js)
	require.Len(t, r.Namespaces, 1)
	require.Len(t, r.Namespaces[0].Readiness, 1)
	assert.Equal(t, "build-1", r.Namespaces[0].Readiness[0].Name)
}
