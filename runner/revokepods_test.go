package runner_test

// Revoke and the pods that outlive it: Pod Security stays in a namespace that survives its
// Profile, pods being deleted count until their grace period ends, and the objects
// a data-plane label requires outlast the pods however the namespace goes (plugin.AdmissionGuard,
// plugin.ProtectionFinalizer).

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/labelowners"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/pss"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

const (
	enforceLabel = "pod-security.kubernetes.io/enforce"
	sidecarPod   = "injected" // a pod with its own proxy: no data-plane label or policy holds it
)

// podSecurityLabels are the labels the pss plugin sets with the default configuration.
var podSecurityLabels = map[string]string{
	"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest",
	"pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/audit-version": "latest",
	"pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "latest",
}

// withPodSecurity adds the pss plugin to the mesh's runner.
func (m *mesh) withPodSecurity() *mesh {
	m.t.Helper()
	ps, err := pss.New(m.cfg)
	require.NoError(m.t, err)
	r, err := runner.NewRunner(m.c, authz.New(m.cfg), waypoint.New(m.cfg), ps)
	require.NoError(m.t, err)
	m.runner = r
	m.wireReads()
	return m
}

// podSecurity is the namespace's Pod Security labels.
func (m *mesh) podSecurity() map[string]string {
	m.t.Helper()
	out := map[string]string{}
	for k, v := range m.labels() {
		if strings.HasPrefix(k, "pod-security.kubernetes.io/") {
			out[k] = v
		}
	}
	return out
}

func (m *mesh) namespace() *corev1.Namespace {
	m.t.Helper()
	n := &corev1.Namespace{}
	require.NoError(m.t, m.c.Get(context.Background(), client.ObjectKey{Name: ns}, n))
	return n
}

func waitingFor(res *runner.Result, what string) bool {
	return slices.ContainsFunc(res.Waiting(), func(w string) bool { return strings.Contains(w, what) })
}

// terminatingPod is a pod being deleted whose grace period ends at deadline: the kubelet has not
// confirmed its end yet (the test's finalizer stands in for that).
func terminatingPod(name string, deadline time.Time) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: []string{"test.example.com/kubelet"},
			DeletionTimestamp: &metav1.Time{Time: deadline}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
}

// A namespace that outlives its Profile (handed over by its owner annotation) keeps its Pod
// Security labels for good: the RoleBindings kfam made for contributors outlive the Profile, and
// without the labels the API server admits their privileged pods. Revoke waits on no pod for them
// (the tenant's pods would otherwise decide when the offboarding ends), writes nothing for them,
// and warns that it leaves them; the labels stay once the last pod is gone too.
func TestRevokeOfASurvivingNamespaceLeavesPodSecurityInPlace(t *testing.T) {
	m := newMesh(t).withPodSecurity()
	m.enrol()
	require.Equal(t, podSecurityLabels, m.podSecurity())
	m.addPod(sidecarPod, map[string]string{"sidecar.istio.io/status": "{}"})

	res := m.runner.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting(), "no pod holds the Revoke back")
	assert.True(t, slices.ContainsFunc(res.Warnings(), func(w string) bool {
		return strings.Contains(w, "outlives its Profile") && strings.Contains(w, "pod-security.kubernetes.io/enforce=baseline")
	}), "says what it leaves and why: %v", res.Warnings())
	assert.Equal(t, podSecurityLabels, m.podSecurity(), "Pod Security stays")
	assert.NotContains(t, m.labels(), useWaypoint, "routing comes off at once")
	assert.NotContains(t, m.labels(), dataplaneMode, "no pod depends on ambient")

	m.deletePod(sidecarPod)
	m.writes = nil
	res = m.runner.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting())
	assert.Equal(t, podSecurityLabels, m.podSecurity(), "the labels stay once the last pod is gone")
	assert.Empty(t, m.writes, "a second Revoke writes nothing")
}

// An admin who keeps the namespace may take the labels over: what another field manager applied
// too is left to it (the runner lets go, and the label stays). A level another writer changed is
// that writer's already; the runner's own labels stay beside it.
func TestRevokeLeavesPodSecurityAnotherWriterHoldsToThatWriter(t *testing.T) {
	t.Parallel()
	t.Run("applied under the admin's field manager", func(t *testing.T) {
		m := newMesh(t).withPodSecurity()
		m.enrol()
		m.addPod(sidecarPod, map[string]string{"sidecar.istio.io/status": "{}"})
		require.NoError(t, m.c.Apply(context.Background(), corev1ac.Namespace(ns).WithLabels(podSecurityLabels),
			client.FieldOwner("platform-admin")))

		res := m.runner.Revoke(context.Background(), testProfile())
		require.NoError(t, res.Err())
		assert.Empty(t, res.Waiting())
		assert.Equal(t, podSecurityLabels, m.podSecurity(), "the admin's labels stay")
		for key, managers := range labelowners.Managers(m.namespace()) {
			if strings.HasPrefix(key, "pod-security.kubernetes.io/") {
				assert.Equal(t, []string{"platform-admin"}, managers, "the runner let go of %s", key)
			}
		}
	})
	t.Run("one level changed by kubectl label", func(t *testing.T) {
		m := newMesh(t).withPodSecurity()
		m.enrol()
		m.addPod(sidecarPod, map[string]string{"sidecar.istio.io/status": "{}"})
		m.editNamespace("kubectl-label", func(n *corev1.Namespace) { n.Labels[enforceLabel] = "restricted" })

		res := m.runner.Revoke(context.Background(), testProfile())
		require.NoError(t, res.Err())
		assert.Empty(t, res.Waiting())
		assert.Equal(t, "restricted", m.labels()[enforceLabel])
		assert.Equal(t, "restricted", m.labels()["pod-security.kubernetes.io/audit"], "the runner's own labels stay")
	})
}

// A namespace the Profile controls goes away with it, so its Pod Security labels are left for its
// deletion to take: nothing is written for them, nothing waits, and a namespace the Profile's
// deletion orphans instead keeps them for good. (A namespace being deleted is the same case; the
// fake client loses a terminating object's finalizers on apply, so that one is tested on the API
// server: internal/integration TestRevokeOfADeletedNamespaceLeavesPodSecurityToItsDeletion.)
func TestRevokeLeavesPodSecurityToTheDeletionOfALeavingNamespace(t *testing.T) {
	t.Parallel()
	m := newMesh(t).withPodSecurity()
	m.enrol()
	m.addPod(sidecarPod, map[string]string{"sidecar.istio.io/status": "{}"})
	m.controlledByProfile()
	res := m.runner.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting(), "the finalizer must not wait on a namespace that is going away")
	assert.Equal(t, podSecurityLabels, m.podSecurity())
	assert.NotContains(t, m.labels(), useWaypoint)
}

// A pod being deleted still serves until the kubelet stops it at the end of its grace period, so
// Revoke keeps ambient and the ztunnel policy for it until then, and no longer: a pod whose
// object lingers past that (a lost node, a finalizer) holds nothing.
func TestRevokeKeepsAmbientForATerminatingPodUntilItsGracePeriodEnds(t *testing.T) {
	m := newMesh(t, terminatingPod("draining", time.Now().Add(time.Hour)))
	m.enrol()
	res := m.runner.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.True(t, waitingFor(res, "keeps istio.io/dataplane-mode=ambient"), "%v", res.Waiting())
	assert.True(t, waitingFor(res, "draining"), "%v", res.Waiting())
	assert.Equal(t, "ambient", m.labels()[dataplaneMode])
	assert.NotNil(t, m.policy(ztunnelName))

	m = newMesh(t, terminatingPod("lingering", time.Now().Add(-time.Minute)))
	m.enrol()
	res = m.runner.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting(), "a pod past its grace period holds nothing")
	assert.NotContains(t, m.labels(), dataplaneMode)
	assert.Nil(t, m.policy(ztunnelName))
}

// The finalizer goes only where garbage collection would take the ztunnel policy with the
// Profile: in a namespace the Profile controls. Elsewhere Revoke decides when the policy goes.
func TestTheZtunnelPolicyCarriesTheFinalizerWhereTheProfileControlsTheNamespace(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.enrol()
	assert.NotContains(t, m.policy(ztunnelName).Finalizers, plugin.ProtectionFinalizer, "annotation-owned: Revoke prunes it itself")

	m.controlledByProfile()
	require.NoError(t, m.apply().Err())
	assert.Equal(t, []string{plugin.ProtectionFinalizer}, m.policy(ztunnelName).Finalizers)
	assert.Empty(t, m.policy(ownerName).Finalizers, "only what a data-plane label requires")
	m.converged("the finalizer is part of the desired object")
}

// Revoke of a namespace the Profile controls leaves the ztunnel policy to the namespace's ordered
// deletion: without the Profile's owner reference garbage collection does not delete it with the
// Profile, and without the finalizer nothing waits for a runner that no longer runs. Revoke says
// so once, then writes nothing.
func TestRevokeHandsTheZtunnelPolicyToTheNamespacesDeletion(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.controlledByProfile()
	m.enrol()
	m.addPod("app", nil)
	require.Contains(t, m.policy(ztunnelName).Finalizers, plugin.ProtectionFinalizer)

	res := m.runner.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting())
	p := m.policy(ztunnelName)
	require.NotNil(t, p)
	assert.Empty(t, p.Finalizers)
	assert.Empty(t, p.OwnerReferences, "garbage collection must not take it with the Profile")
	assert.Equal(t, "ambient", m.labels()[dataplaneMode])
	assert.Contains(t, m.writes, "patch AuthorizationPolicy/"+ztunnelName)

	m.writes = nil
	require.NoError(t, m.runner.Revoke(context.Background(), testProfile()).Err())
	assert.Empty(t, m.writes, "handed over once")
}

// A foreground deletion of the Profile lets garbage collection delete the ztunnel policy before
// Revoke runs; the finalizer keeps it, still applying, while the namespace's pods terminate, and
// Revoke lets it go once the last one is gone.
func TestAZtunnelPolicyDeletedWithTheProfileStaysUntilItsPodsAreGone(t *testing.T) {
	m := newMesh(t, terminatingPod("draining", time.Now().Add(time.Hour)))
	m.controlledByProfile()
	m.enrol()
	// Garbage collection deletes the policy, a dependent of the Profile (and the namespace, which
	// the fake client cannot keep terminating through an apply: see the API server's test,
	// internal/integration TestForegroundProfileDeletionKeepsTheZtunnelPolicyUntilThePodsAreGone).
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ztunnelName)))
	require.NotNil(t, m.policy(ztunnelName).DeletionTimestamp)

	profile := testProfile()
	profile.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	profile.Finalizers = []string{metav1.FinalizerDeleteDependents}
	res := m.runner.Revoke(context.Background(), profile)
	require.NoError(t, res.Err())
	assert.True(t, waitingFor(res, "which is being deleted, until no pod depends on it"), "%v", res.Waiting())
	assert.False(t, waitingFor(res, "delete the namespace or the pods"), "the deletion in progress ends the pods: %v", res.Waiting())
	require.NotNil(t, m.policy(ztunnelName), "kept while the pod terminates")
	assert.Equal(t, "ambient", m.labels()[dataplaneMode])

	background := testProfile()
	background.DeletionTimestamp = profile.DeletionTimestamp
	res = m.runner.Revoke(context.Background(), background)
	assert.True(t, waitingFor(res, "delete the namespace or the pods to finish"),
		"in a background deletion nothing ends the pods while the Profile waits, so it says what does: %v", res.Waiting())

	// The kubelet confirms the pod's end.
	pod := &corev1.Pod{}
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "draining"}, pod))
	pod.Finalizers = nil
	require.NoError(t, m.c.Update(context.Background(), pod))
	res = m.runner.Revoke(context.Background(), profile)
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting())
	assert.Nil(t, m.policy(ztunnelName), "released once no pod depends on it")
}

// Apply never releases an object its plugin still wants while the namespace stays: being deleted
// (by an admin, or garbage collection after an owner went), it keeps its finalizer and still
// applies, and the Result says so; the labels that require it stay.
func TestApplyKeepsAWantedZtunnelPolicyThatIsBeingDeleted(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.controlledByProfile()
	m.enrol()
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ztunnelName)))

	res := m.apply()
	require.NoError(t, res.Err())
	assert.True(t, slices.ContainsFunc(res.Warnings(), func(w string) bool {
		return strings.Contains(w, "is being deleted although plugin authz wants it")
	}), "%v", res.Warnings())
	require.NotNil(t, m.policy(ztunnelName))
	assert.Contains(t, m.policy(ztunnelName).Finalizers, plugin.ProtectionFinalizer)
	enrolled(t, m.labels())
}

// An object its plugin no longer wants is released even while it is being deleted and the plugin
// still wants others: the ztunnel policy, deleted by an admin as the mesh switches to sidecar
// mode, loses its finalizer and goes, without the warning for an object still wanted.
func TestApplyReleasesAZtunnelPolicyBeingDeletedThatItsPluginNoLongerWants(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.controlledByProfile()
	m.enrol()
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ztunnelName)))
	require.NotNil(t, m.policy(ztunnelName).DeletionTimestamp)
	m.configure(config.ModeSidecar)
	for range 3 {
		res := m.apply()
		require.NoError(t, res.Err())
		assert.False(t, slices.ContainsFunc(res.Warnings(), func(w string) bool {
			return strings.Contains(w, "although plugin authz wants it")
		}), "%v", res.Warnings())
	}
	assert.Nil(t, m.policy(ztunnelName), "the policy no plugin wants is released")
	require.NotNil(t, m.policy(ownerName), "the plugin still wants its owner policy")
}

// A data-plane label only another writer holds is that writer's business in Revoke: the runner
// prunes its ztunnel policy and lets it go at once, rather than waiting, call after call, on pods
// that label enrols. (Found by internal/safety: the finalizer kept the deleted policy for them,
// and every Revoke deleted it again.)
func TestRevokeReleasesTheZtunnelPolicyWhenOnlyAnotherWriterEnrolsThePods(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.controlledByProfile()
	m.enrol()
	m.addPod("app", nil)
	m.editNamespace("kubectl-label", func(n *corev1.Namespace) { delete(n.Labels, dataplaneMode) })
	require.NoError(t, m.c.Apply(context.Background(), corev1ac.Namespace(ns).WithLabels(map[string]string{dataplaneMode: "ambient"}),
		client.FieldOwner("gitops")))

	res := m.runner.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting())
	assert.Nil(t, m.policy(ztunnelName), "pruned and released")
	assert.Equal(t, "ambient", m.labels()[dataplaneMode], "gitops's label stays")

	m.writes = nil
	require.NoError(t, m.runner.Revoke(context.Background(), testProfile()).Err())
	assert.Empty(t, m.writes)
}

// Prune never deletes an object that is being deleted already: while a finalizer keeps it, each
// call would otherwise send the same delete again.
func TestAnObjectBeingDeletedIsNotDeletedAgain(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.enrol()
	owner := m.policy(ownerName)
	owner.Finalizers = []string{"someone.example.com/audit"}
	require.NoError(t, m.c.Update(context.Background(), owner, client.FieldOwner("someone")))
	require.NoError(t, m.c.Delete(context.Background(), owner))
	require.NotNil(t, m.policy(ownerName).DeletionTimestamp)

	m.writes = nil
	require.NoError(t, m.runner.Revoke(context.Background(), testProfile()).Err())
	assert.NotContains(t, m.writes, "delete AuthorizationPolicy/"+ownerName)
	m.writes = nil
	require.NoError(t, m.runner.Revoke(context.Background(), testProfile()).Err())
	assert.Empty(t, m.writes, "nothing left to do")
}
