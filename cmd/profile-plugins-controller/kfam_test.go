package main

import (
	"context"
	"fmt"
	"path"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

// kfamManager is the field manager of the imitation below.
const kfamManager = "kfam"

// kfamImitation sends a contributor change as kfam does, request for request
// (kubeflow/dashboard components/access-management/kfam/bindings.go, BindingClient): add creates
// the RoleBinding and then POSTs the policy (security.istio.io/v1beta1, no targetRefs); remove
// reads the binding and the policy, then deletes the binding and then the policy. Any error is
// what kfam would answer the dashboard with. The stock-controller test drives the real binary.
type kfamImitation struct {
	c  client.Client
	ns string
}

func (k kfamImitation) add(ctx context.Context, user, role string) error {
	if err := k.c.Create(ctx, kfamRoleBinding(k.ns, user, role), client.FieldOwner(kfamManager)); err != nil {
		return fmt.Errorf("kfam add %s: creating the RoleBinding: %w", user, err)
	}
	pol := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "security.istio.io/v1beta1", "kind": "AuthorizationPolicy",
		"metadata": map[string]any{"name": authz.ContributorPolicyName(user, role), "namespace": k.ns,
			"annotations": map[string]any{authz.UserAnnotation: user, authz.RoleAnnotation: role}},
		"spec": map[string]any{"rules": []any{map[string]any{
			"from": []any{map[string]any{"source": map[string]any{"principals": []any{
				"cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account", "cluster.local/ns/kubeflow/sa/ml-pipeline-ui"}}}},
			"when": []any{map[string]any{"key": "request.headers[kubeflow-userid]", "values": []any{user}}},
		}}},
	}}
	if err := k.c.Create(ctx, pol, client.FieldOwner(kfamManager)); err != nil {
		return fmt.Errorf("kfam add %s: POSTing the AuthorizationPolicy: %w", user, err)
	}
	return nil
}

func (k kfamImitation) remove(ctx context.Context, user, role string) error {
	name := authz.ContributorPolicyName(user, role)
	key := client.ObjectKey{Namespace: k.ns, Name: name}
	if err := k.c.Get(ctx, key, &rbacv1.RoleBinding{}); err != nil {
		return fmt.Errorf("kfam remove %s: reading the RoleBinding: %w", user, err)
	}
	if err := k.c.Get(ctx, key, &istiosecurityv1.AuthorizationPolicy{}); err != nil {
		return fmt.Errorf("kfam remove %s: reading the AuthorizationPolicy: %w", user, err)
	}
	if err := k.c.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: name}}); err != nil {
		return fmt.Errorf("kfam remove %s: deleting the RoleBinding: %w", user, err)
	}
	if err := k.c.Delete(ctx, &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: name}}); err != nil {
		return fmt.Errorf("kfam remove %s: deleting the AuthorizationPolicy: %w", user, err)
	}
	return nil
}

// policyCreations watches the contributor policies of ns and notes who created each version that
// came into existence (the first managedFields entry of an ADDED object).
type policyCreations struct {
	mu       sync.Mutex
	creators map[string]int
}

func watchPolicyCreations(t *testing.T, ctx context.Context, env *envtest.Env, ns string) *policyCreations {
	t.Helper()
	wc, err := client.NewWithWatch(env.Base, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	w, err := wc.Watch(ctx, &istiosecurityv1.AuthorizationPolicyList{}, client.InNamespace(ns))
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	pc := &policyCreations{creators: map[string]int{}}
	go func() {
		for ev := range w.ResultChan() {
			pol, ok := ev.Object.(*istiosecurityv1.AuthorizationPolicy)
			if ev.Type != watch.Added || !ok || !strings.HasPrefix(pol.Name, "user-") || len(pol.ManagedFields) == 0 {
				continue
			}
			pc.mu.Lock()
			pc.creators[pol.ManagedFields[0].Manager]++
			pc.mu.Unlock()
		}
	}()
	return pc
}

func (pc *policyCreations) snapshot() map[string]int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	out := map[string]int{}
	for k, v := range pc.creators {
		out[k] = v
	}
	return out
}

// runAtOnce runs each step in its own goroutine at once and returns the errors, which are what
// kfam would have answered the dashboard with.
func runAtOnce(ctx context.Context, steps map[string]func(context.Context, string, string) error) []string {
	var (
		mu     sync.Mutex
		failed []string
		wg     sync.WaitGroup
	)
	for user, step := range steps {
		wg.Go(func() {
			if err := step(ctx, user, authz.RoleEdit); err != nil {
				mu.Lock()
				failed = append(failed, err.Error())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}

// Tens of contributors added and removed through kfam's two-request sequences at once: thirty
// added together; then fifteen of them removed while ten more are added; then the fifteen added
// again once their removal settled. Every request succeeds, because the plugin leaves the creation
// of each policy to kfam's POST and its deletion to kfam's DELETE. At the end each contributor's
// policy is the plugin's, on the waypoint, with exactly the contributor's rule, and a removed
// contributor's is gone.
func TestKfamsRequestsNeverFailBecauseOfThePlugin(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t).Counted(t)
	cfg := config.Default()
	cfg.Authorization.Contributors = config.ContributorsByPlugin
	require.NoError(t, cfg.Validate())
	const ns = "kfam-race"
	// only: the managers of other tests on the shared server, with other contributor settings,
	// reconcile only their own Profiles, so none of them writes these policies.
	ctx := startManager(t, env.Config, ctrl.Options{}, cfg, only(nil, ns))
	h := &harness{t: t, env: env}
	c := env.Client
	createProfile(t, c, ns, "owner@example.com")
	require.Eventually(t, func() bool {
		n := &corev1.Namespace{}
		return c.Get(ctx, client.ObjectKey{Name: ns}, n) == nil && n.Labels["istio.io/dataplane-mode"] == "ambient"
	}, 30*time.Second, 50*time.Millisecond)
	h.programWaypoint(ns)
	require.Eventually(t, func() bool {
		return h.namespace(ns).Labels["istio.io/use-waypoint"] == "waypoint"
	}, 30*time.Second, 50*time.Millisecond)
	created := watchPolicyCreations(t, ctx, env, ns)

	kfam := kfamImitation{c: c, ns: ns}
	user := func(i int) string { return fmt.Sprintf("contributor-%02d@example.com", i) }
	steps := func(from, to int, step func(context.Context, string, string) error, into map[string]func(context.Context, string, string) error) {
		for i := from; i < to; i++ {
			into[user(i)] = step
		}
	}
	first := map[string]func(context.Context, string, string) error{}
	steps(0, 30, kfam.add, first)
	assert.Empty(t, runAtOnce(ctx, first), "thirty adds at once")
	// Wait until the plugin took every policy over, so the removals meet its policies.
	for i := range 30 {
		h.waitForContributor(ns, user(i))
	}

	second := map[string]func(context.Context, string, string) error{}
	steps(0, 15, kfam.remove, second)
	steps(30, 40, kfam.add, second)
	assert.Empty(t, runAtOnce(ctx, second), "fifteen removals and ten adds at once")
	for i := range 15 {
		h.waitForNoPolicy(ns, user(i))
	}

	// The same contributors added again right after their removal: a cache that still shows the
	// binding kfam deleted, or the policy, must not have the plugin bring the policy back before
	// kfam's POST (runner: the contested object's sources are listed on the API server before it
	// is created, and an update of it names the UID read).
	third := map[string]func(context.Context, string, string) error{}
	steps(0, 15, kfam.add, third)
	assert.Empty(t, runAtOnce(ctx, third), "fifteen adds again at once")
	for i := range 40 {
		h.waitForContributor(ns, user(i))
	}
	want := map[string]int{kfamManager: 30 + 10 + 15}
	assert.Eventually(t, func() bool { return reflect.DeepEqual(want, created.snapshot()) }, 10*time.Second, 100*time.Millisecond,
		"every policy was created by kfam's POST, none by the plugin")
	t.Logf("contributor policies created, by field manager: %v", created.snapshot())
}

// waitForContributor waits until user's policy is the plugin's, on the waypoint, with the user's
// rule alone.
func (h *harness) waitForContributor(ns, user string) {
	h.t.Helper()
	name := authz.ContributorPolicyName(user, authz.RoleEdit)
	pol := &istiosecurityv1.AuthorizationPolicy{}
	require.Eventually(h.t, func() bool {
		return h.env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pol) == nil &&
			pol.Labels["app.kubernetes.io/managed-by"] == "profile-plugins" && len(pol.Spec.TargetRefs) == 1
	}, 60*time.Second, 100*time.Millisecond, "%s's policy is taken over onto the waypoint", user)
	require.Len(h.t, pol.Spec.Rules, 1, user)
	assert.Equal(h.t, []string{user}, pol.Spec.Rules[0].When[0].Values, user)
	assert.NotContains(h.t, pol.Annotations, authz.WithdrawnAnnotation, user)
}

// waitForNoPolicy waits until user's policy is gone.
func (h *harness) waitForNoPolicy(ns, user string) {
	h.t.Helper()
	name := authz.ContributorPolicyName(user, authz.RoleEdit)
	require.Eventually(h.t, func() bool {
		err := h.env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &istiosecurityv1.AuthorizationPolicy{})
		return apierrors.IsNotFound(err)
	}, 60*time.Second, 100*time.Millisecond, "%s's policy is deleted", user)
}

// kfam adds and removes contributors with the guard installed, in both installs as shipped
// (their PluginConfig, the guard rendered from it, the controller running as the build's
// ServiceAccount): the no-fork overlay, where kfam's ServiceAccount is one of guard.policyWriters
// and the reference controller runs as its own, and the fork, where the fork and kfam run as the
// profiles controller's ServiceAccount. kfam's POST of a contributor's policy is admitted, and so
// is its DELETE of the policy once the authz plugin adopted it (a contributor's policy only
// grants, so deleting it never opens the namespace). Before the guard let that DELETE through,
// every removal answered the dashboard with the guard's refusal.
func TestKfamAddsAndRemovesContributorsWithTheGuardInstalled(t *testing.T) {
	oneAtATime(t, guardServer)
	for _, build := range []struct{ dir, controllerSA string }{
		{besideDir, "profile-plugins"}, {forkDir, "profiles-controller-service-account"},
	} {
		t.Run(build.dir, func(t *testing.T) { kfamUnderTheGuard(t, build.dir, build.controllerSA) })
	}
}

func kfamUnderTheGuard(t *testing.T, dir, controllerSA string) {
	env := envtest.StartNamed(t, guardServer)
	cfg := pluginConfig(t, kustomize(t, dir))
	installGuard(t, env.Client, cfg)
	build := path.Base(dir)
	ns := "kfam-guarded-" + build
	clusterAdmin(t, env.Client, "controller-"+build, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: controllerSA, Namespace: "kubeflow"})
	controller := rest.CopyConfig(env.Config)
	controller.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kubeflow:" + controllerSA,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kubeflow", "system:authenticated"}}
	ctx := startManager(t, controller, ctrl.Options{}, cfg, only(nil, ns))
	h := &harness{t: t, env: env}
	createProfile(t, env.Client, ns, "owner@example.com")
	require.Eventually(t, func() bool {
		n := &corev1.Namespace{}
		return env.Client.Get(ctx, client.ObjectKey{Name: ns}, n) == nil && n.Labels["istio.io/dataplane-mode"] == "ambient"
	}, 30*time.Second, 50*time.Millisecond, "the controller enrols the namespace under the guard")
	h.programWaypoint(ns)

	const kfamUser = "system:serviceaccount:kubeflow:profiles-controller-service-account"
	clusterAdmin(t, env.Client, "kfam-"+build, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "profiles-controller-service-account", Namespace: "kubeflow"})
	kfam := kfamImitation{c: fixture.As(t, env.Base, envtest.NewScheme(), kfamUser, "system:serviceaccounts", "system:serviceaccounts:kubeflow"), ns: ns}
	users := []string{"ann@example.com", "ben@example.com", "cy@example.com"}
	for _, u := range users {
		require.NoError(t, kfam.add(ctx, u, authz.RoleEdit), "kfam adds %s: the dashboard gets 200", u)
	}
	for _, u := range users {
		h.waitForContributor(ns, u)
	}
	for _, u := range users {
		require.NoError(t, kfam.remove(ctx, u, authz.RoleEdit), "kfam removes %s: the dashboard gets 200", u)
		h.waitForNoPolicy(ns, u)
	}
	require.NoError(t, kfam.add(ctx, users[0], authz.RoleEdit), "kfam adds a removed contributor again")
	h.waitForContributor(ns, users[0])
}
