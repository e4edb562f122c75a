package runner_test

// Routing comes off before the write that makes it stale. A restoring write of the waypoint
// Gateway (or a change of it, or of the patch ConfigMap istiod builds it from) gives istiod a
// generation it has not programmed: from that write until istiod reports it Programmed,
// istio.io/use-waypoint must not point at the waypoint. The label phase withholding it after the
// write leaves that moment open (the property test found it as W-ROUTE); the withdraw phase takes
// the label off before it.

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// routedAtWrites records, for every write of an object named in watch, whether the namespace
// carried a routing label at the moment the write was sent.
func (m *mesh) routedAtWrites(watch ...string) *[]string {
	var routed []string
	m.fail = func(verb string, obj any) error {
		what := describe(obj)
		for _, w := range watch {
			if what != w {
				continue
			}
			labels := m.labels()
			if labels[useWaypoint] != "" || labels[ingressUseWaypoint] != "" {
				routed = append(routed, verb+" "+what)
			}
		}
		return nil
	}
	return &routed
}

func TestRoutingIsWithdrawnBeforeAStatusGatedObjectIsWritten(t *testing.T) {
	t.Parallel()
	gateway := "Gateway/waypoint"
	patch := "ConfigMap/waypoint-seccomp"
	for name, tc := range map[string]struct {
		patched bool
		edit    func(*mesh)
		written string
	}{
		"the Gateway restored from another writer's Update": {edit: func(m *mesh) {
			gw := m.gateway()
			gw.Spec.Listeners[0].Port = 15009
			require.NoError(t, m.c.Update(context.Background(), gw, client.FieldOwner("kubectl-edit")))
		}, written: gateway},
		"the Gateway's parametersRef removed by another writer": {patched: true, edit: func(m *mesh) {
			gw := m.gateway()
			gw.Spec.Infrastructure = nil
			require.NoError(t, m.c.Update(context.Background(), gw, client.FieldOwner("kubectl-edit")))
		}, written: gateway},
		"the patch ConfigMap restored from another writer's Update": {patched: true, edit: func(m *mesh) {
			cm := m.configMap("waypoint-seccomp")
			cm.Data["deployment"] = "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        image: evil/proxy\n"
			require.NoError(t, m.c.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")))
		}, written: patch},
		"the Gateway changed by the configuration": {edit: func(m *mesh) {
			m.cfg.Mesh.Waypoint.Labels = map[string]string{"team": "ml"}
			m.configure(config.ModeAmbient)
		}, written: gateway},
	} {
		t.Run(name, func(t *testing.T) {
			m := newMesh(t)
			if tc.patched {
				m.withPatch()
			}
			m.enrol()
			tc.edit(m)
			m.countGeneration()
			m.program() // istiod programs whatever the edit made
			routed := m.routedAtWrites(gateway, patch)
			m.writes = nil

			res := m.apply()
			require.NoError(t, res.Err())
			assert.Empty(t, *routed, "a routing label stood while the call wrote the object it requires: %v", m.writes)
			wrote := writesOf(m.writes, tc.written)
			require.NotEmpty(t, wrote, "the call wrote %s: %v", tc.written, m.writes)
			assert.True(t, strings.HasPrefix(m.writes[0], "apply labels"), "the first write is the withdrawal: %v", m.writes)
			restoredNotRouted(t, m.labels())

			m.fail = nil
			if tc.written == gateway {
				m.countGeneration()
				m.program()
			}
			require.NoError(t, m.apply().Err())
			enrolled(t, m.labels())
			m.converged("quiet once routed again")
		})
	}
}

// writesOf lists the writes of the named object.
func writesOf(writes []string, what string) []string {
	var out []string
	for _, w := range writes {
		if strings.HasSuffix(w, " "+what) {
			out = append(out, w)
		}
	}
	return out
}

// When the withdrawal fails, the object is not written either: routing keeps pointing at the
// version istiod programmed, which is what it routes to, and the next call withdraws first.
func TestAFailedWithdrawalLeavesTheStatusGatedObjectAsItIs(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.enrol()
	gw := m.gateway()
	gw.Spec.Listeners[0].Port = 15009
	require.NoError(t, m.c.Update(context.Background(), gw, client.FieldOwner("kubectl-edit")))
	m.countGeneration()
	m.program()
	edited := m.gateway().Spec
	m.fail = failFirstLabelWrite()
	m.writes = nil

	res := m.apply()
	require.Error(t, res.Err())
	assert.Equal(t, edited, m.gateway().Spec, "written while the routing labels still pointed at it")
	var left []string
	for _, w := range res.Waiting() {
		if strings.Contains(w, "is left as it is until the enrolment labels that route to it are withdrawn") {
			left = append(left, w)
		}
	}
	t.Logf("waiting: %q", res.Waiting())
	if assert.Len(t, left, 1, "only the changed object waits; those as desired protect as they stand: %q", res.Waiting()) {
		assert.Contains(t, left[0], "Gateway")
	}
	assert.NotContains(t, m.writes, "update Gateway/waypoint")
	assert.NotContains(t, m.writes, "apply Gateway/waypoint")

	m.fail = nil
	require.NoError(t, m.apply().Err())
	assert.NotEqual(t, edited, m.gateway().Spec, "restored once the labels are off")
	restoredNotRouted(t, m.labels())
}

// failFirstLabelWrite makes the first namespace label write fail, and no other.
func failFirstLabelWrite() func(string, any) error {
	failed := false
	return func(_ string, obj any) error {
		if failed || !strings.HasPrefix(describe(obj), "labels ") {
			return nil
		}
		failed = true
		return apierrors.NewServiceUnavailable("injected")
	}
}

// A routing label another writer set stays across the runner's rewrite of its waypoint: server-side
// apply cannot take another manager's label off, and the waypoint must not go unrepaired for it.
// The runner says so in the Result, and the ztunnel policy, intact throughout, refuses whatever is
// sent before istiod programs the new generation (the property test's W-ROUTE leaves the Programmed
// condition of such a label to its writer).
func TestAnotherWritersRoutingLabelOnARewrittenWaypointIsReportedAndTheNamespaceStaysClosed(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.editNamespace("gitops", func(n *corev1.Namespace) {
		n.Labels = map[string]string{useWaypoint: m.cfg.Mesh.Waypoint.Name}
	})
	m.enrol()
	ztunnel := m.policy(ztunnelName).Spec.DeepCopy()

	m.cfg.Mesh.Waypoint.Labels = map[string]string{"team": "ml"}
	m.configure(config.ModeAmbient)
	res := m.apply()
	require.NoError(t, res.Err())
	require.NotEmpty(t, writesOf(m.writes, "Gateway/waypoint"), "the call rewrote the waypoint: %v", m.writes)
	assert.Equal(t, m.cfg.Mesh.Waypoint.Name, m.labels()[useWaypoint], "gitops's label stays")
	assert.Contains(t, strings.Join(res.Warnings(), "\n"),
		"namespace label "+useWaypoint+"="+m.cfg.Mesh.Waypoint.Name+" was set by gitops although Gateway.gateway.networking.k8s.io/waypoint was changed in this call")
	assert.Equal(t, ztunnel, m.policy(ztunnelName).Spec.DeepCopy(), "the ztunnel policy keeps admitting only the waypoint")

	m.countGeneration()
	m.program()
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
	m.converged("quiet once istiod programs the new generation")
}
