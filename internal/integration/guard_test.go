package integration

// The admission guard (package guard) on the real API server, with Kubeflow's own roles: members
// bound to kubeflow-edit, kubeflow-admin and kubeflow-view try what the guard refuses and get its
// message (or RBAC's refusal, where their role does not reach that far); a member given more than
// Kubeflow's roles (write on Istio's objects and namespaces) is refused by the guard all the same;
// the controller's ServiceAccount converges with the guard installed and makes the same changes;
// the break-glass group may too.

import (
	"context"
	"strings"
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
	"k8s.io/client-go/rest"
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

func kubeflowRoles(t *testing.T) []*rbacv1.ClusterRole { return fixture.KubeflowRoles(t) }

// as is a client of the test API server acting as user in groups.
func as(t *testing.T, env *envtest.Env, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := client.New(cfg, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	return c
}

// guardDenied asserts err is the guard's refusal by policy, with a message containing want.
func guardDenied(t *testing.T, err error, policy, want string) {
	t.Helper()
	require.Error(t, err, "admitted; want %s to refuse it", policy)
	assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy '"+policy+"'", "not the guard's refusal")
	assert.Contains(t, err.Error(), want)
	assert.Contains(t, err.Error(), "ask your platform admin")
}

// refusedWhoeverCreatesIt asserts that pod, as a webhook leaves it after the guard judged its
// template, is refused by the pods policy (dry run) from the ReplicaSet controller as from the
// member: the guard judges every pod created in a managed namespace, after every mutating webhook.
func refusedWhoeverCreatesIt(t *testing.T, rsController, member client.Client, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	for who, c := range map[string]client.Client{"the replicaset controller": rsController, "the member": member} {
		err := c.Create(ctx, pod.DeepCopy(), client.DryRunAll)
		require.Error(t, err, "the pod from %s is refused", who)
		require.Contains(t, err.Error(), guard.PodsPolicy, who)
	}
}

func bind(t *testing.T, c client.Client, ns, user, role string) {
	t.Helper()
	require.NoError(t, c.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: strings.NewReplacer("@", "-", ".", "-").Replace(user) + "-" + role, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}))
}

func TestTheGuardRefusesKubeflowMembersAndAdmitsTheControllerOnTheAPIServer(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	root := env.Client
	ctx := context.Background()
	for _, r := range kubeflowRoles(t) {
		require.NoError(t, root.Create(ctx, r))
	}
	require.NoError(t, root.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widened"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"security.istio.io", "gateway.networking.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}},
	}}))
	fixture.ClusterAdmin(t, root, "profile-plugins", rbacv1.Subject{Kind: "ServiceAccount", Name: "profile-plugins", Namespace: "kubeflow"})
	cfg := config.Default()
	installGuardOf(t, root, cfg)

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

// In sidecar mode the guard refuses sidecar.istio.io/inject=false, as label or annotation, except
// for the pods guard.optOutAllowed names; workloads istiod makes (the waypoint's pods carry
// istio.io/dataplane-mode=none) are admitted in ambient mode.
func TestTheGuardsOptOutExceptionsOnTheAPIServer(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	root := env.Client
	ctx := context.Background()
	for _, r := range kubeflowRoles(t) {
		require.NoError(t, root.Create(ctx, r))
	}
	p := profileIn(t, root, "sidecar-guarded")
	bind(t, root, p.Name, editor, "kubeflow-edit")
	cfg := config.Default()
	cfg.Mesh.Mode = config.ModeSidecar
	cfg.Guard.OptOutAllowed = []config.OptOut{{Namespace: p.Name, ServiceAccount: "pipeline-runner"}}
	installGuardOf(t, root, cfg)
	tenant := as(t, env, editor)
	pod := func(name, sa string, labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Name, Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	}
	off := map[string]string{"sidecar.istio.io/inject": "false"}
	require.Eventually(t, func() bool {
		err := tenant.Create(ctx, pod("probe", "", off, nil), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.PodsPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the guard takes effect")
	guardDenied(t, tenant.Create(ctx, pod("label", "", off, nil), client.DryRunAll), guard.PodsPolicy, "sidecar.istio.io/inject other than 'true' runs the pod without a sidecar")
	guardDenied(t, tenant.Create(ctx, pod("annotation", "", nil, off), client.DryRunAll), guard.PodsPolicy, "sidecar.istio.io/inject other than")
	require.NoError(t, tenant.Create(ctx, pod("allowed", "pipeline-runner", nil, off), client.DryRunAll), "guard.optOutAllowed admits it")
	injected := pod("ambient-label", "", map[string]string{"istio.io/dataplane-mode": "none"}, map[string]string{"sidecar.istio.io/status": `{"containers":["istio-proxy"]}`})
	injected.Spec.Containers = append(injected.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "proxyv2", Args: []string{"proxy", "sidecar"}})
	require.NoError(t, tenant.Create(ctx, injected, client.DryRunAll), "ambient's opt-out label means nothing to an injected pod in sidecar mode and is not refused")

	// Ambient mode: istiod's waypoint Deployment (its pods labelled dataplane-mode=none) is admitted.
	cfg.Mesh.Mode = config.ModeAmbient
	require.NoError(t, cfg.Validate())
	objs, err := guard.Objects(cfg)
	require.NoError(t, err)
	for _, o := range objs {
		cur := o.DeepCopyObject().(client.Object)
		require.NoError(t, root.Get(ctx, client.ObjectKeyFromObject(o), cur))
		o.SetResourceVersion(cur.GetResourceVersion())
		require.NoError(t, root.Update(ctx, o))
	}
	fixture.GuardInForce(t, root)
	istiod := as(t, env, "system:serviceaccount:istio-system:istiod", "system:serviceaccounts")
	fixture.ClusterAdmin(t, root, "istiod", rbacv1.Subject{Kind: "ServiceAccount", Name: "istiod", Namespace: "istio-system"})
	waypointDeployment := func() *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "waypoint", Namespace: p.Name}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"gateway.networking.k8s.io/gateway-name": "waypoint"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
				"gateway.networking.k8s.io/gateway-name": "waypoint", "istio.io/dataplane-mode": "none"}},
				Spec: pod("", "waypoint", nil, nil).Spec}}}
	}
	require.Eventually(t, func() bool {
		err := tenant.Create(ctx, waypointDeployment(), client.DryRunAll)
		// The workloads policy (its template opts out) or the waypoint policy (istiod's name and
		// labels), whichever the API server reports first.
		return err != nil && (strings.Contains(err.Error(), "istio.io/dataplane-mode=none") || strings.Contains(err.Error(), "[waypoint/"))
	}, 30*time.Second, 200*time.Millisecond, "the ambient guard takes effect and refuses the tenant's copy")
	require.NoError(t, istiod.Create(ctx, waypointDeployment(), client.DryRunAll), "istiod makes the waypoint Deployment")
}

// The status subresource of a pod takes label changes too (only the spec is kept), so the guard
// matches pods/status: a status write that adds istio.io/dataplane-mode=none is refused like any
// other update, and one that changes no label or annotation passes, also for a pod that opted
// out before the guard (an admin's, here), so the kubelet keeps reporting its status.
func TestTheGuardJudgesLabelsWrittenThroughAPodsStatusOnTheAPIServer(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	root := env.Client
	ctx := context.Background()
	require.NoError(t, root.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pod-status-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/status"}, Verbs: []string{"get", "update", "patch"}},
	}}))
	require.NoError(t, root.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "node-agent-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pod-status-writer"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "node-agent"}}}))
	cfg := config.Default()
	installGuardOf(t, root, cfg)
	p := profileIn(t, root, "pod-status")
	legacy := boundPod(p.Name, "opted-out-before", false)
	legacy.Labels = map[string]string{"istio.io/dataplane-mode": "none"}
	require.NoError(t, root.Create(ctx, legacy), "system:masters is never refused")
	require.NoError(t, root.Create(ctx, boundPod(p.Name, "meshed", false)))
	agent := as(t, env, "node-agent")

	optOut := func() error {
		pod := &corev1.Pod{}
		require.NoError(t, root.Get(ctx, client.ObjectKey{Namespace: p.Name, Name: "meshed"}, pod))
		pod.Labels = map[string]string{"istio.io/dataplane-mode": "none"}
		return agent.Status().Update(ctx, pod, client.DryRunAll)
	}
	require.Eventually(t, func() bool {
		err := optOut()
		return err != nil && strings.Contains(err.Error(), guard.PodsPolicy)
	}, 30*time.Second, 200*time.Millisecond, "a status write that opts the pod out of the mesh is refused")
	guardDenied(t, optOut(), guard.PodsPolicy, "istio.io/dataplane-mode=none")

	pod := &corev1.Pod{}
	require.NoError(t, root.Get(ctx, client.ObjectKey{Namespace: p.Name, Name: "opted-out-before"}, pod))
	pod.Status.Phase = corev1.PodRunning
	require.NoError(t, agent.Status().Update(ctx, pod), "a status write that changes no metadata passes, whatever the pod's labels")
	require.NoError(t, root.Get(ctx, client.ObjectKey{Namespace: p.Name, Name: "opted-out-before"}, pod))
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase)
}
