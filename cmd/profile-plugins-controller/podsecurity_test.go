package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

const enforceLabel = "pod-security.kubernetes.io/enforce"

func TestPodSecurityWarningsReachTheResult(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const ns = "carol"
	require.NoError(t, c.Create(context.Background(), ownedNamespace(ns, "carol@example.com")))
	require.NoError(t, c.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}))
	require.NoError(t, c.Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "root-shell", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sh", Image: "busybox",
			SecurityContext: &corev1.SecurityContext{Privileged: ptrTo(true)}}}},
	}))
	createProfile(t, c, ns, "carol@example.com")
	p := h.profile(ns)
	res := h.r.Runner.Apply(context.Background(), p)
	require.NoError(t, res.Err())
	warnings := strings.Join(res.Warnings(), "\n")
	assert.Contains(t, warnings, "pss: tightening enforce from \"privileged\" to \"baseline\": 1 running pod(s) violate it", "the preflight")
	assert.Contains(t, warnings, `existing pods in namespace "carol" violate the new PodSecurity enforce level "baseline:latest"`, "the API server's own warning")
}

// Issue 13: "A GitOps tool's enforce=restricted is force-applied down to the admin's baseline,
// silently." On the real API server, a writer with its own field manager sets restricted; the
// reconcile keeps it, says who set it, and the label survives that writer withdrawing it.
func TestForeignStricterEnforceIsKept(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	ctx := context.Background()
	const ns, gitops = "ivan", "argocd-controller"
	createProfile(t, c, ns, "ivan@example.com")
	h.reconcile(ns)
	require.Equal(t, "baseline", h.labels(ns)[enforceLabel])

	require.NoError(t, c.Apply(ctx, corev1ac.Namespace(ns).WithLabels(map[string]string{enforceLabel: "restricted"}),
		client.FieldOwner(gitops), client.ForceOwnership))
	rec := events.NewFakeRecorder(100)
	h.r.Recorder = rec
	h.reconcile(ns)
	assert.Equal(t, "restricted", h.labels(ns)[enforceLabel], "never loosened")
	var said []string
	for len(rec.Events) > 0 {
		said = append(said, <-rec.Events)
	}
	assert.Contains(t, strings.Join(said, "\n"), `pss: enforce level "restricted" (version latest) set by field manager `+gitops+` is stricter than the configured "baseline"`,
		"a warning event names the other writer")

	before := h.env.Requests.Writes()
	h.reconcile(ns)
	assert.Equal(t, "restricted", h.labels(ns)[enforceLabel])
	assert.Equal(t, before, h.env.Requests.Writes(), "keeping it is a steady state: no write")

	// The tool withdraws its label: it never vanishes, and returns to the admin's level.
	require.NoError(t, c.Apply(ctx, corev1ac.Namespace(ns).WithLabels(map[string]string{}), client.FieldOwner(gitops), client.ForceOwnership))
	assert.Equal(t, "restricted", h.labels(ns)[enforceLabel], "the plugin co-owns the value, so the label stays")
	h.reconcile(ns)
	assert.Equal(t, "baseline", h.labels(ns)[enforceLabel])
}

// Issue 13: "preflight: hold with no level yet (every new namespace, every namespace at rollout)
// leaves the namespace without any enforce label while a violating pod runs."
func TestPreflightHoldWithoutALevelAppliesTheAdminsLevel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	cfg := config.Default()
	cfg.PodSecurity.Preflight = config.PreflightHold
	h.useConfig(cfg)
	c := h.env.Client
	ctx := context.Background()
	const ns = "judy"
	require.NoError(t, c.Create(ctx, ownedNamespace(ns, "judy@example.com")))
	require.NoError(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}))
	require.NoError(t, c.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "root-shell", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sh", Image: "busybox",
			SecurityContext: &corev1.SecurityContext{Privileged: ptrTo(true)}}}},
	}))
	createProfile(t, c, ns, "judy@example.com")

	res := h.r.Runner.Apply(ctx, h.profile(ns))
	require.NoError(t, res.Err())
	assert.Equal(t, "baseline", h.labels(ns)[enforceLabel], "a namespace without a level gets the admin's")
	warnings := strings.Join(res.Warnings(), "\n")
	assert.Contains(t, warnings, "hold keeps an existing enforce level only")
	assert.Contains(t, warnings, "root-shell (privileged", "the violating pod is listed")
}
