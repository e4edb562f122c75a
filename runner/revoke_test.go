package runner_test

// Revoke takes routing labels off first, then the objects behind them, and data-plane labels and
// what running pods depend on last.

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Revoke takes routing labels off first, then the L7 objects; dataplane-mode and the ztunnel
// policy stay while a pod runs in ambient, and go once it is gone.
func TestRevokeKeepsPodsCovered(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.addPod("app", nil)
	res := m.runner.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Equal(t, runner.DefaultWaitRequeue, res.RequeueAfter())
	assert.Contains(t, strings.Join(res.Waiting(), "\n"), "keeps istio.io/dataplane-mode=ambient and the objects it requires until no pod depends on it")
	labels := m.labels()
	assert.Equal(t, "ambient", labels[dataplaneMode])
	assert.NotContains(t, labels, useWaypoint)
	assert.NotContains(t, labels, ingressUseWaypoint)
	assert.NotNil(t, m.policy(ztunnelName))
	assert.Nil(t, m.policy(ownerName))
	labelsAt := slices.IndexFunc(m.writes, func(w string) bool { return strings.HasPrefix(w, "apply labels") })
	ownerAt := slices.Index(m.writes, "delete AuthorizationPolicy/"+ownerName)
	require.GreaterOrEqual(t, labelsAt, 0)
	assert.Less(t, labelsAt, ownerAt, "routing labels come off before the owner policy: %v", m.writes)

	// Still waiting while the pod runs, and without writing again.
	m.writes = nil
	res = m.runner.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.NotEmpty(t, res.Waiting())
	assert.Empty(t, m.writes)

	m.deletePod("app")
	m.writes = nil
	res = m.runner.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting())
	assert.NotContains(t, m.labels(), dataplaneMode)
	assert.Nil(t, m.policy(ztunnelName))
	assert.Equal(t, []string{"apply labels ", "delete AuthorizationPolicy/" + ztunnelName}, m.writes, "the label goes before its policy")
}

// Pods with a sidecar, terminating pods and a namespace the Profile controls do not hold revoke.
func TestRevokeDoesNotWaitWhereNoPodDependsOnAmbient(t *testing.T) {
	t.Run("sidecar pod", func(t *testing.T) {
		m := newMesh(t)
		m.enrol()
		m.addPod("injected", map[string]string{"sidecar.istio.io/status": "{}"})
		res := m.runner.Revoke(context.Background(), testProfile())
		require.NoError(t, res.Err())
		assert.Empty(t, res.Waiting())
		assert.NotContains(t, m.labels(), dataplaneMode)
	})
	t.Run("profile controls the namespace", func(t *testing.T) {
		m := newMesh(t)
		m.enrol()
		m.addPod("app", nil)
		m.controlledByProfile()
		res := m.runner.Revoke(context.Background(), testProfile())
		require.NoError(t, res.Err())
		assert.Empty(t, res.Waiting(), "the finalizer must not wait: garbage collection takes namespace, pods and policy together")
		assert.Equal(t, "ambient", m.labels()[dataplaneMode], "left to garbage collection")
		assert.NotContains(t, m.labels(), useWaypoint)
		assert.NotNil(t, m.policy(ztunnelName))
	})
	t.Run("another owner controls the namespace", func(t *testing.T) {
		m := newMesh(t)
		m.enrol()
		m.addPod("app", nil)
		m.editNamespace("", func(n *corev1.Namespace) {
			n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Thing", Name: "x", UID: "other", Controller: ptrTo(true)}}
		})
		res := m.runner.Revoke(context.Background(), testProfile())
		require.NoError(t, res.Err(), "a namespace that is not the Profile's must not hold its finalizer")
		assert.Empty(t, res.Waiting())
		assert.NotEmpty(t, res.Warnings(), "says the namespace was left alone")
		assert.Equal(t, "ambient", m.labels()[dataplaneMode], "not the Profile's namespace: nothing revoked there")
		assert.NotNil(t, m.policy(ztunnelName))
	})
	t.Run("namespace being deleted", func(t *testing.T) {
		m := newMesh(t)
		m.enrol()
		m.addPod("app", nil)
		m.editNamespace("", func(n *corev1.Namespace) { n.Finalizers = []string{"test/keep"} })
		require.NoError(t, m.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		res := m.runner.Revoke(context.Background(), testProfile())
		require.NoError(t, res.Err())
		assert.Empty(t, res.Waiting())
	})
}

// A Revoke whose label write fails deletes nothing: the labels still route traffic to, and enrol
// pods behind, the policies and the waypoint. The next Revoke finishes the job.
func TestRevokeDeletesNothingWhileItsLabelsCouldNotBeTakenOff(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.fail = func(verb string, obj any) error {
		if describe(obj) == "labels " {
			return apierrors.NewServiceUnavailable("injected")
		}
		return nil
	}
	res := m.runner.Revoke(context.Background(), testProfile())
	require.Error(t, res.Err())
	assert.True(t, res.Retryable())
	enrolled(t, m.labels())
	assert.NotNil(t, m.policy(ztunnelName))
	assert.NotNil(t, m.policy(ownerName))
	for _, w := range m.writes {
		assert.False(t, strings.HasPrefix(w, "delete "), "deleted while labels stayed: %v", m.writes)
	}

	m.fail = nil
	require.NoError(t, m.runner.Revoke(context.Background(), testProfile()).Err())
	assert.Nil(t, m.policy(ownerName))
	assert.NotContains(t, m.labels(), useWaypoint)
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := &testPlugin{
		name: "mesh",
		objects: func(plugin.Target) []client.Object {
			return []client.Object{configMap("cfg", nil), policy("owner", ns)}
		},
		labels: map[string]string{"istio.io/dataplane-mode": "ambient"},
	}
	foreign := configMap("users-own", nil)
	foreign.Namespace = ns
	require.NoError(t, e.Create(context.Background(), foreign))
	r := newRunner(t, e, p)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())

	res := r.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Len(t, res.Plugins[0].Deleted, 2)
	assert.Equal(t, []string{"istio.io/dataplane-mode"}, res.Plugins[0].LabelsRemoved)
	labels := e.namespace(t).Labels
	assert.NotContains(t, labels, "istio.io/dataplane-mode")
	assert.Equal(t, "ml", labels["team"])
	require.NoError(t, e.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "users-own"}, &corev1.ConfigMap{}))

	writes := e.writes
	res = r.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.False(t, res.Changed())
	assert.Equal(t, writes, e.writes, "a second revoke must write nothing")
}

func TestRevokeOfAMissingNamespaceSucceeds(t *testing.T) {
	t.Parallel()
	c := fake.NewClientBuilder().WithScheme(runner.NewScheme()).Build()
	res := newRunner(t, c, &testPlugin{name: "mesh"}).Revoke(context.Background(), testProfile())
	assert.NoError(t, res.Err())
}
