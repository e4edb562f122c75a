package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
)

// reconcileLog wraps the Reconciler and notes, after each call, which contributor policies exist
// (read from the API server, not the cache), so a test can tell what one reconcile achieved.
type reconcileLog struct {
	next  reconcile.Reconciler
	c     client.Client
	ns    string
	mu    sync.Mutex
	after []sets.Set[string]
}

func (r *reconcileLog) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.next.Reconcile(ctx, req)
	if req.Name != r.ns {
		return res, err
	}
	pols := &istiosecurityv1.AuthorizationPolicyList{}
	if listErr := r.c.List(ctx, pols, client.InNamespace(r.ns)); listErr == nil {
		names := sets.New[string]()
		for _, p := range pols.Items {
			if strings.HasPrefix(p.Name, "user-") {
				names.Insert(p.Name)
			}
		}
		r.mu.Lock()
		r.after = append(r.after, names)
		r.mu.Unlock()
	}
	return res, err
}

func (r *reconcileLog) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.after)
}

// firstAfter waits for the first reconcile after mark calls and returns the contributor
// policies that existed once it returned.
func (r *reconcileLog) firstAfter(t *testing.T, mark int) sets.Set[string] {
	t.Helper()
	require.Eventually(t, func() bool { return r.calls() > mark }, 10*time.Second, 20*time.Millisecond,
		"the watch must reconcile the Profile (no requeue is pending: the waypoint is Programmed)")
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.after[mark]
}

// quiet waits until no reconcile has run for a while, so the next one is the event's.
func (r *reconcileLog) quiet(t *testing.T) int {
	t.Helper()
	last := -1
	require.Eventually(t, func() bool {
		n := r.calls()
		settled := n == last
		last = n
		return settled
	}, 20*time.Second, 700*time.Millisecond)
	return last
}

// kfamRoleBinding is a contributor's RoleBinding exactly as kfam creates it
// (kubeflow/dashboard components/access-management/kfam/bindings.go, BindingClient.Create).
func kfamRoleBinding(ns, user, role string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{
			Name: authz.ContributorPolicyName(user, role), Namespace: ns,
			Annotations: map[string]string{authz.UserAnnotation: user, authz.RoleAnnotation: role},
		},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubeflow-" + role},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
}

// Contributors converge through the RoleBinding watch: adding kfam's binding creates the
// contributor's policy, and deleting it removes the policy, each in the first reconcile after the
// event. A wildcard contributor gets no policy and an error in the condition and the events.
func TestContributorBindingsConvergeThroughTheWatch(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t).Counted(t)
	cfg := config.Default()
	cfg.Authorization.Contributors = config.ContributorsByPlugin
	// This test is about the watch: with no grace period the plugin writes each change itself in
	// the first reconcile (TestKfamsRequestsNeverFailBecauseOfThePlugin covers the waits for kfam).
	cfg.Authorization.KfamGracePeriod = &metav1.Duration{}
	require.NoError(t, cfg.Validate())
	const ns = "contrib"
	var rec *reconcileLog
	ctx := startManager(t, env.Config, ctrl.Options{}, cfg, only(func(r *Reconciler) reconcile.Reconciler {
		rec = &reconcileLog{next: r, c: env.Client, ns: ns}
		return rec
	}, ns))

	h := &harness{t: t, env: env}
	c := env.Client
	createProfile(t, c, ns, "owner@example.com")
	require.Eventually(t, func() bool {
		n := &corev1.Namespace{}
		return c.Get(ctx, client.ObjectKey{Name: ns}, n) == nil && n.Labels["istio.io/dataplane-mode"] == "ambient"
	}, 10*time.Second, 50*time.Millisecond)
	// Programmed: from here on nothing asks for a requeue, so only watch events reconcile.
	h.programWaypoint(ns)
	require.Eventually(t, func() bool {
		return len(h.profile(ns).Status.Conditions) == 1 && h.profile(ns).Status.Conditions[0].Status == "True"
	}, 10*time.Second, 50*time.Millisecond)

	// kfam adds bob as a contributor.
	mark := rec.quiet(t)
	bob := kfamRoleBinding(ns, "bob@example.com", authz.RoleEdit)
	require.NoError(t, c.Create(ctx, bob))
	assert.Equal(t, sets.New(bob.Name), rec.firstAfter(t, mark), "one reconcile creates the contributor's policy")
	pol := &istiosecurityv1.AuthorizationPolicy{}
	require.True(t, h.exists(pol, ns, bob.Name))
	assert.Equal(t, []string{"bob@example.com"}, pol.Spec.Rules[0].When[0].Values)
	require.Len(t, pol.Spec.TargetRefs, 1, "attached to the waypoint")

	// A RoleBinding without kfam's annotations does not reconcile the Profile.
	mark = rec.quiet(t)
	other := kfamRoleBinding(ns, "ci@example.com", authz.RoleView)
	other.Name, other.Annotations = "ci-reader", nil
	require.NoError(t, c.Create(ctx, other))
	time.Sleep(time.Second)
	assert.Equal(t, mark, rec.calls(), "a RoleBinding that names no contributor is filtered out")

	// kfam removes bob.
	mark = rec.quiet(t)
	require.NoError(t, c.Delete(ctx, bob))
	assert.Empty(t, rec.firstAfter(t, mark), "one reconcile removes the contributor's policy")
	assert.False(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, bob.Name))

	// The owner grants "everyone" through kfam's own naming: no policy, and a loud error.
	mark = rec.quiet(t)
	everyone := kfamRoleBinding(ns, "*", authz.RoleView)
	require.Equal(t, "user-clusterrole-view", everyone.Name)
	require.NoError(t, c.Create(ctx, everyone))
	assert.Empty(t, rec.firstAfter(t, mark), "a wildcard contributor gets no policy")
	cond := h.profile(ns).Status.Conditions[0]
	assert.Equal(t, "False", cond.Status)
	assert.Contains(t, cond.Message, `RoleBinding user-clusterrole-view: no contributor policy: contributor.user: Invalid value: "*": Istio reads "*" as "any value"`)
	owner := &istiosecurityv1.AuthorizationPolicy{}
	require.True(t, h.exists(owner, ns, "ns-owner-access-istio"), "the owner keeps access")
	assert.Equal(t, []string{"owner@example.com"}, owner.Spec.Rules[0].When[0].Values)
	require.Eventually(t, func() bool {
		evs := &eventsv1.EventList{}
		require.NoError(t, c.List(ctx, evs, client.InNamespace(metav1.NamespaceDefault)))
		for _, e := range evs.Items {
			if e.Regarding.Name == ns && e.Reason == "PluginError" && strings.Contains(e.Note, "user-clusterrole-view") {
				return true
			}
		}
		return false
	}, 10*time.Second, 100*time.Millisecond, "the refusal is an event on the Profile")

	// kfam, not checking, then POSTs its policy for "*": it is not the plugin's to delete, but
	// the Profile's condition says at once that it must go.
	kfamPolicy, err := authz.ContributorPolicy(cfg, ns, "placeholder@example.com", authz.RoleView)
	require.NoError(t, err)
	kfamPolicy.Name, kfamPolicy.Spec.TargetRefs = everyone.Name, nil
	kfamPolicy.Annotations = map[string]string{authz.UserAnnotation: "*", authz.RoleAnnotation: authz.RoleView}
	kfamPolicy.Spec.Rules[0].When[0].Values = []string{"*"}
	require.NoError(t, c.Create(ctx, kfamPolicy, client.FieldOwner("kfam")))
	require.Eventually(t, func() bool {
		return strings.Contains(h.profile(ns).Status.Conditions[0].Message,
			`AuthorizationPolicy user-clusterrole-view (not made by this plugin, for user "*"): spec.rules[0].when[0].values[0]: Invalid value: "*"`)
	}, 10*time.Second, 50*time.Millisecond, "kfam's wildcard policy is reported through the policy watch")
	got := &istiosecurityv1.AuthorizationPolicy{}
	require.True(t, h.exists(got, ns, everyone.Name))
	assert.Empty(t, got.Labels, "another writer's policy is left alone")

	// Removing the wildcard binding and kfam's policy clears the error.
	require.NoError(t, c.Delete(ctx, got))
	require.NoError(t, c.Delete(ctx, everyone))
	require.Eventually(t, func() bool { return h.profile(ns).Status.Conditions[0].Status == "True" }, 10*time.Second, 50*time.Millisecond)
}
