package guard_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// An ephemeral container is judged as a change of its pod: a member who may add one (an admin's
// grant; Kubeflow's roles do not) debugs a pod in the mesh, but adds nothing to a pod the checks
// refuse now, such as one that opted out before the guard (the tenant re-review of Dec 5).
func TestEphemeralContainersAreJudgedAsTheirPod(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := s.namespace(t, "ephemeral")
	debug := []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}

	meshed := plainPod(ns, "meshed")
	require.NoError(t, s.env.Client.Create(ctx, meshed))
	meshed.Spec.EphemeralContainers = debug
	notTheGuards(t, s.as(t, widened).SubResource("ephemeralcontainers").Update(ctx, meshed, client.DryRunAll), "a debug container in a pod of the mesh")

	// Made by a trusted writer, as before the guard: out of the ambient mesh.
	out := plainPod(ns, "opted-out")
	out.Labels = map[string]string{"istio.io/dataplane-mode": "none"}
	require.NoError(t, s.env.Client.Create(ctx, out))
	out.Spec.EphemeralContainers = debug
	refusedBy(t, s.as(t, widened).SubResource("ephemeralcontainers").Update(ctx, out, client.DryRunAll), "pods/dataplane-mode-none", "a container added to a pod outside the mesh")
}
