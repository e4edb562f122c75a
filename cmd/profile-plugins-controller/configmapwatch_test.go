package main

// The ConfigMap watch of the reference controller's wiring (setup) maps a ConfigMap only to the
// Profile of its own namespace.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// reconcileCounter counts the reconciles of each Profile that reach the Reconciler.
type reconcileCounter struct {
	next reconcile.Reconciler
	mu   sync.Mutex
	by   map[string]int
}

func (c *reconcileCounter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c.mu.Lock()
	c.by[req.Name]++
	c.mu.Unlock()
	return c.next.Reconcile(ctx, req)
}

func (c *reconcileCounter) of(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.by[name]
}

// A ConfigMap in another namespace whose controller reference names a Profile does not reconcile
// that Profile: only the Profile's own namespace can hold its objects. As Owns(&corev1.ConfigMap{})
// the watch enqueued the Profile a controller reference names, by name, whatever its UID, and the
// cache selects ConfigMaps by the managed-by label, which anyone may set: a namespace editor
// (kubeflow-edit may create ConfigMaps) could keep the shared controller reconciling every Profile
// of the cluster, so that a legitimate event (a Programmed waypoint, a drift to restore) waits
// behind them in the one work queue (finding 6, low, of the attack review of Dec 1,
// docs/security/reviews.md).
func TestAnotherNamespacesConfigMapsDoNotReconcileAProfile(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t).Counted(t)
	counter := &reconcileCounter{by: map[string]int{}}
	ctx := startManager(t, env.Config, ctrl.Options{}, modeNone(t), only(func(r *Reconciler) reconcile.Reconciler {
		counter.next = r
		return counter
	}, "victim", "mallory"))
	c := env.Client
	createProfile(t, c, "victim", "victim@example.com")
	createProfile(t, c, "mallory", "mallory@example.com")
	for _, name := range []string{"victim", "mallory"} {
		require.Eventually(t, func() bool {
			n := &corev1.Namespace{}
			return c.Get(ctx, client.ObjectKey{Name: name}, n) == nil && n.Labels["pod-security.kubernetes.io/enforce"] == "baseline"
		}, 20*time.Second, 100*time.Millisecond, "%s converges", name)
	}
	time.Sleep(time.Second)
	before := counter.of("victim")

	// mallory has kubeflow-edit's ConfigMap rights in her own namespace.
	require.NoError(t, c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "edit-configmaps", Namespace: "mallory"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "patch", "delete"}}}}))
	require.NoError(t, c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mallory-edit", Namespace: "mallory"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "edit-configmaps"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "mallory@example.com"}}}))
	cfg := rest.CopyConfig(env.Base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "mallory@example.com"}
	mallory, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	require.NoError(t, err)
	for i := range 10 {
		require.NoError(t, mallory.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("poke-%d", i), Namespace: "mallory",
			Labels: map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: profilev1.GroupVersion.String(), Kind: profilev1.Kind,
				Name: "victim", UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)), Controller: ptrTo(true)}},
		}}))
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	t.Logf("reconciles of Profile victim while mallory wrote ConfigMaps in her own namespace: %d", counter.of("victim")-before)
	assert.Equal(t, before, counter.of("victim"), "another tenant's ConfigMaps reconcile Profile victim")
}

// modeNone is the default configuration in mesh mode none: Pod Security alone, so no reconcile
// waits and requeues, and every reconcile counted is one an event caused.
func modeNone(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Mesh.Mode = config.ModeNone
	require.NoError(t, cfg.Validate())
	return cfg
}
