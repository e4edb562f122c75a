package plugin_test

// Transitions between data planes, and failures in the middle of one, from the security review
// (branch attack). Each test plays one event sequence that a tenant, a namespace editor or a
// careless admin can cause, and asserts the safe outcome. The FINDING comments are the reviewer's:
// what failed open before the fix, and the fix suggested.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
)

const injection = "istio-injection"

// addSidecarPod adds a running pod as Istio's injector leaves it: the status annotation and an
// istio-proxy container.
func (m *mesh) addSidecarPod(name string) {
	m.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{"sidecar.istio.io/status": `{"containers":["istio-proxy"]}`}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}, {Name: "istio-proxy", Image: "proxyv2"}}},
	}
	require.NoError(m.t, m.c.Create(context.Background(), pod))
}

// sidecarSteadyState runs the mesh in sidecar mode to its steady state, with one injected pod.
func (m *mesh) sidecarSteadyState() {
	m.t.Helper()
	m.configure(config.ModeSidecar)
	require.NoError(m.t, m.apply().Err())
	require.Equal(m.t, "enabled", m.labels()[injection])
	owner := m.policy(ownerName)
	require.NotNil(m.t, owner)
	require.Empty(m.t, owner.Spec.TargetRefs, "in sidecar mode the owner policy applies to the pods")
	m.addSidecarPod("app")
	m.writes = nil
}

// sidecarPodsCovered says whether an injected pod would meet an ALLOW policy at all: sidecars
// ignore policies with targetRefs (those are for waypoints), and a pod with no ALLOW policy that
// applies to it allows every caller.
func (m *mesh) sidecarPodsCovered() (bool, []string) {
	m.t.Helper()
	list := &istiosecurityv1.AuthorizationPolicyList{}
	require.NoError(m.t, m.c.List(context.Background(), list, client.InNamespace(ns)))
	var seen []string
	for _, p := range list.Items {
		seen = append(seen, fmt.Sprintf("%s(targetRefs=%d)", p.Name, len(p.Spec.TargetRefs)))
		if len(p.Spec.TargetRefs) == 0 && p.Spec.Selector == nil && p.Spec.Action.String() == "ALLOW" {
			return true, seen
		}
	}
	return false, seen
}

// FINDING (fail-open window, careless admin + one failed write). Phase 0 withdraws enrolment
// labels that are about to change, "so traffic never follows a label to policies that are about
// to be rewritten". When that withdrawal fails (a namespace webhook, a conflict, a timeout), the
// runner goes on with phase 1 anyway: after a rename of mesh.waypoint.name it re-targets the owner
// policy to the new waypoint while use-waypoint still routes the namespace through the old one,
// which now has no owner policy (the ztunnel policy admits it, as a pod of the namespace). Without
// the cluster-wide default-deny the old waypoint then passes every caller to every pod, until the
// prune of phase 3 removes it (never, if that write fails too). The invariant checked here is
// TestFailClosedInvariant's: use-waypoint names a waypoint the owner policy is attached to.
// Suggested fix: when a withdrawal fails, skip phase 1 (and 3) for the objects that the label
// still in place requires; the next reconcile retries in order.
func TestFailedWithdrawalLeavesThePoliciesTheLabelRoutesTo(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.cfg.Mesh.Waypoint.Name = "wp2"
	m.configure(config.ModeAmbient)
	var broken []string
	check := func(when string) {
		n := &corev1.Namespace{}
		require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Name: ns}, n))
		wp, routed := n.Labels[useWaypoint]
		owner := m.policy(ownerName)
		if routed && (owner == nil || len(owner.Spec.TargetRefs) != 1 || owner.Spec.TargetRefs[0].Name != wp) {
			broken = append(broken, fmt.Sprintf("%s: use-waypoint=%s but the owner policy targets %v", when, wp, owner.Spec.TargetRefs))
		}
	}
	m.fail = func(verb string, obj any) error {
		check("before " + verb + " " + describe(obj))
		if strings.HasPrefix(describe(obj), "labels") {
			return fmt.Errorf("injected: namespace label write refused")
		}
		return nil
	}
	res := m.apply()
	m.fail = nil
	check("after the call")
	require.Error(t, res.Err())
	assert.Empty(t, broken, "traffic followed use-waypoint to a waypoint whose owner policy had been moved away; writes %v", m.writes)
}

// Revoke takes routing labels off before the objects behind them; when that write fails, the
// objects stay, so the labels never route traffic to a deleted policy.
func TestFailedUnlabellingInRevokeKeepsThePolicies(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.fail = func(verb string, obj any) error {
		if strings.HasPrefix(describe(obj), "labels") {
			return fmt.Errorf("injected: namespace label write refused")
		}
		return nil
	}
	res := m.runner.Revoke(context.Background(), testProfile())
	require.Error(t, res.Err())
	enrolled(t, m.labels())
	assert.NotNil(t, m.policy(ownerName), "use-waypoint still routes through the waypoint: its owner policy must stay")
	assert.NotNil(t, m.policy(ztunnelName))
	for _, w := range m.writes {
		assert.False(t, strings.HasPrefix(w, "delete"), "nothing is pruned while the labels stay: %v", m.writes)
	}
	m.fail = nil
	require.NoError(t, m.runner.Revoke(context.Background(), testProfile()).Err())
	assert.Nil(t, m.policy(ownerName))
}
