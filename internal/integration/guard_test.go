package integration

// The admission guard (package guard) on the real API server, with Kubeflow's own roles: members
// bound to kubeflow-edit, kubeflow-admin and kubeflow-view try what the guard refuses and get its
// message (or RBAC's refusal, where their role does not reach that far); a member given more than
// Kubeflow's roles (write on Istio's objects and namespaces) is refused by the guard all the same;
// the controller's ServiceAccount converges with the guard installed and makes the same changes;
// the break-glass group may too. The tests share an API server of their own with the guard in
// force (guardedEnv); the guard's tests without a controller are in package guard.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

const (
	controllerUser = "system:serviceaccount:kubeflow:profile-plugins"
	editor         = "edna@example.com"
	admin          = "adam@example.com"
	viewer         = "vic@example.com"
	widened        = "wil@example.com" // kubeflow-edit and write on Istio's objects and namespaces
)

// guardDenied asserts err is the guard's refusal by policy, with a message containing want.
func guardDenied(t *testing.T, err error, policy, want string) {
	t.Helper()
	require.Error(t, err, "admitted; want %s to refuse it", policy)
	assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy '"+policy+"'", "not the guard's refusal")
	assert.Contains(t, err.Error(), want)
	assert.Contains(t, err.Error(), "ask your platform admin")
}

var (
	guardedMu  sync.Mutex
	guardedCfg *config.Config
)

// guardedEnv returns the package's API server with the guard of the default PluginConfig in force
// (a server apart from Start's: the guard's policies are cluster-scoped), and that configuration.
// It has Kubeflow's roles, the ClusterRole "widened" (write on Istio's objects and namespaces) to
// bind in a namespace, the controller's ServiceAccount bound to cluster-admin, and widened allowed
// to update namespaces and their status everywhere, as the tests of a namespace-label writer need.
func guardedEnv(t *testing.T) (*envtest.Env, *config.Config) {
	t.Helper()
	guardedMu.Lock()
	defer guardedMu.Unlock()
	env := envtest.StartNamed(t, "guard")
	if guardedCfg != nil {
		return env, guardedCfg
	}
	root := env.Client
	ctx := context.Background()
	for _, r := range fixture.KubeflowRoles(t) {
		require.NoError(t, root.Create(ctx, r))
	}
	require.NoError(t, root.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widened"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"security.istio.io", "gateway.networking.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}},
	}}))
	require.NoError(t, root.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "namespace-status-patcher"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces/status"}, Verbs: []string{"get", "update", "patch"}},
	}}))
	require.NoError(t, root.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wil-namespaces"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "namespace-status-patcher"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: widened}}}))
	fixture.ClusterAdmin(t, root, "profile-plugins", rbacv1.Subject{Kind: "ServiceAccount", Name: "profile-plugins", Namespace: "kubeflow"})
	cfg := config.Default()
	fixture.InstallGuard(t, root, cfg)
	guardedCfg = cfg
	return env, cfg
}

func TestGuardRefusesMembersAdmitsController(t *testing.T) {
	t.Parallel()
	env, cfg := guardedEnv(t)
	root := env.Client
	ctx := context.Background()
	controller := as(t, env, controllerUser, "system:serviceaccounts", "system:serviceaccounts:kubeflow")
	p := profileIn(t, root, "guarded")
	for _, u := range []struct{ user, role string }{{editor, "kubeflow-edit"}, {admin, "kubeflow-admin"}, {viewer, "kubeflow-view"}, {widened, "kubeflow-edit"}, {widened, "widened"}} {
		bind(t, root, p.Name, u.user, u.role)
	}
	r, err := profileplugins.NewRunner(controller, cfg)
	require.NoError(t, err)
	routeThroughWaypoint(t, r, root, p)
	converged(t, r, p)

	// The guard is in force once the API server has loaded it.
	tenant := as(t, env, editor)
	optOut := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Name, Labels: map[string]string{"istio.io/dataplane-mode": "none"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	}
	require.Eventually(t, func() bool {
		err := tenant.Create(ctx, optOut("probe"), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.PodsPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the guard takes effect")

	t.Run("members of the namespace", func(t *testing.T) {
		for _, user := range []string{editor, admin} {
			c := as(t, env, user)
			guardDenied(t, c.Create(ctx, optOut("none")), guard.PodsPolicy, "istio.io/dataplane-mode=none takes the pod out of the ambient mesh")
			status := optOut("status")
			status.Labels = nil
			status.Annotations = map[string]string{"sidecar.istio.io/status": "{}"}
			guardDenied(t, c.Create(ctx, status), guard.PodsPolicy, "makes Istio leave the pod to a sidecar")
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: p.Name}, Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x", "istio.io/dataplane-mode": "none"}},
					Spec: optOut("").Spec}}}
			guardDenied(t, c.Create(ctx, dep), guard.WorkloadsPolicy, "Deployment "+p.Name+"/app (its pod template): istio.io/dataplane-mode=none")
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: p.Name, Labels: map[string]string{"istio.io/use-waypoint": "elsewhere"}},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
			guardDenied(t, c.Create(ctx, svc), guard.ServicesPolicy, "istio.io/use-waypoint=elsewhere sends traffic past this namespace's waypoint waypoint")
			svc.Labels = map[string]string{"istio.io/use-waypoint-namespace": "other"}
			guardDenied(t, c.Create(ctx, svc), guard.ServicesPolicy, "istio.io/use-waypoint-namespace=other sends traffic to another namespace's waypoint")
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "waypoint-seccomp", Namespace: p.Name}}
			guardDenied(t, c.Create(ctx, cm), guard.ManagedObjectsPolicy, "the name is reserved for an object profile-plugins makes")
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: p.Name,
				Labels: map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "waypoint"}}}
			guardDenied(t, c.Create(ctx, cm), guard.ManagedObjectsPolicy, "are for the objects profile-plugins makes")
			// What Kubeflow's roles do not grant, RBAC refuses before the guard is asked.
			pol := ztunnelPolicy(t, root, p.Name)
			assert.True(t, apierrors.IsForbidden(c.Delete(ctx, pol)), "%s may not delete AuthorizationPolicies at all", user)
			n := &corev1.Namespace{}
			require.NoError(t, root.Get(ctx, client.ObjectKey{Name: p.Name}, n))
			delete(n.Labels, "istio.io/dataplane-mode")
			assert.True(t, apierrors.IsForbidden(c.Update(ctx, n)), "%s may not update the namespace at all", user)
			// What the guard does not concern itself with stays possible.
			plain := optOut("plain-" + strings.Split(user, "@")[0])
			plain.Labels = nil
			require.NoError(t, c.Create(ctx, plain, client.DryRunAll))
		}
		c := as(t, env, viewer)
		assert.True(t, apierrors.IsForbidden(c.Create(ctx, optOut("view"))), "kubeflow-view may not create pods")
	})

	t.Run("a member with write on Istio's objects and the namespace", func(t *testing.T) {
		c := as(t, env, widened)
		pol := ztunnelPolicy(t, root, p.Name)
		guardDenied(t, c.Delete(ctx, pol), guard.ManagedObjectsPolicy, "AuthorizationPolicy "+p.Name+"/"+pol.Name+" is managed by profile-plugins")
		if pol.Annotations == nil {
			pol.Annotations = map[string]string{}
		}
		pol.Annotations["x"] = "y"
		// An update of the ztunnel policy (an ALLOW policy) is refused by two policies, the
		// managed-objects and the mesh-config one; the API server reports either, in no fixed order.
		err := c.Update(ctx, pol)
		if err != nil && strings.Contains(err.Error(), guard.MeshConfigPolicy) {
			guardDenied(t, err, guard.MeshConfigPolicy, "[mesh-config/allow-policies]")
		} else {
			guardDenied(t, err, guard.ManagedObjectsPolicy, "is managed by profile-plugins")
		}
		n := &corev1.Namespace{}
		require.NoError(t, root.Get(ctx, client.ObjectKey{Name: p.Name}, n))
		n.Labels["istio.io/dataplane-mode"] = "none"
		n.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
		guardDenied(t, c.Update(ctx, n), guard.NamespaceLabelsPolicy, "the labels istio.io/dataplane-mode, pod-security.kubernetes.io/enforce are managed by profile-plugins")
		// With the break-glass group the same changes go through (dry run: nothing changes).
		glass := as(t, env, widened, config.DefaultBreakGlassGroup)
		require.NoError(t, glass.Update(ctx, n, client.DryRunAll))
		require.NoError(t, glass.Delete(ctx, ztunnelPolicy(t, root, p.Name), client.DryRunAll))
	})

	t.Run("the controller", func(t *testing.T) {
		n := &corev1.Namespace{}
		require.NoError(t, root.Get(ctx, client.ObjectKey{Name: p.Name}, n))
		n.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
		require.NoError(t, controller.Update(ctx, n, client.DryRunAll))
		require.NoError(t, controller.Delete(ctx, ztunnelPolicy(t, root, p.Name), client.DryRunAll))
		require.NoError(t, controller.Create(ctx, optOut("by-controller"), client.DryRunAll))
		converged(t, r, p)
	})

	// system:masters, whom no authorizer refuses anything (deleting the guard included), is let
	// through like the controller; a cluster admin by RBAC alone uses the break-glass group.
	pol := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, root.Get(ctx, client.ObjectKey{Namespace: p.Name, Name: cfg.Authorization.ZtunnelPolicyName}, pol))
	require.NoError(t, root.Delete(ctx, pol, client.DryRunAll))
}

// The guard keeps a namespace's guarded labels through the status subresource too (review R4-2,
// docs/security/reviews.md: high where anyone but the controller may write namespaces/status). The guard's namespace-labels
// policy matches resources "namespaces" only (guard/guard.go, the Rule of namespaceLabels), not the
// subresource "namespaces/status", and the API server takes metadata, labels included, from a
// namespace's status update. A writer with update on namespaces/status (not granted by Kubeflow's
// roles; granted by any role with resources "*" or "namespaces/*") changes
// pod-security.kubernetes.io/enforce to privileged and istio.io/dataplane-mode to none: admitted,
// and a privileged pod is admitted until the runner's next reconcile repairs the labels (the pod
// stays). Fixed: the guard matches namespaces/status (and pods/status, services/status) too.
func TestGuardRefusesLabelsViaNamespaceStatus(t *testing.T) {
	t.Parallel()
	env, cfg := guardedEnv(t)
	root := env.Client
	ctx := context.Background()
	controller := as(t, env, controllerUser, "system:serviceaccounts", "system:serviceaccounts:kubeflow")
	p := profileIn(t, root, "status")
	r, err := profileplugins.NewRunner(controller, cfg)
	require.NoError(t, err)
	routeThroughWaypoint(t, r, root, p)
	before := namespaceLabels(t, root, p.Name)
	t.Logf("labels before: %v", before)

	attacker := as(t, env, widened)
	n := &corev1.Namespace{}
	require.NoError(t, root.Get(ctx, client.ObjectKey{Name: p.Name}, n))
	n.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	require.Eventually(t, func() bool {
		err := attacker.Update(ctx, n, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.NamespaceLabelsPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the guard takes effect and refuses a change of value")

	require.NoError(t, root.Get(ctx, client.ObjectKey{Name: p.Name}, n))
	n.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	n.Labels["istio.io/dataplane-mode"] = "none"
	require.Error(t, root.Create(ctx, boundPod(p.Name, "privileged-before", true)), "baseline refuses a privileged pod")
	err = attacker.Status().Update(ctx, n)
	t.Logf("status update: %v", err)
	after := namespaceLabels(t, root, p.Name)
	t.Logf("labels after: %v", after)
	assert.Equal(t, before["pod-security.kubernetes.io/enforce"], after["pod-security.kubernetes.io/enforce"], "changed through namespaces/status")
	assert.Equal(t, before["istio.io/dataplane-mode"], after["istio.io/dataplane-mode"], "changed through namespaces/status")
	assert.Error(t, root.Create(ctx, boundPod(p.Name, "privileged-after", true)), "a privileged pod is admitted after the status update")
}
