package guard_test

// The guard on the real API server: one server for the package, the guard of the default
// PluginConfig (ambient) installed once, Kubeflow's roles created; each test works in managed
// namespaces of its own, with members bound there, and runs in parallel with the others.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

func TestMain(m *testing.M) { envtest.Main(m) }

// The identities the tests act as.
const (
	editor  = "edna@example.com" // kubeflow-edit in the namespace, as kfam binds a contributor
	admin   = "adam@example.com" // kubeflow-admin, as the owner is bound
	widened = "wil@example.com"  // kubeflow-edit and what Kubeflow's roles do not grant (see widenedRules)
	istiod  = "system:serviceaccount:istio-system:istiod"
	kcm     = "system:kube-controller-manager"
	rsCtl   = "system:serviceaccount:kube-system:replicaset-controller"
	kubelet = "system:node:node-1"
	kfam    = "system:serviceaccount:kubeflow:profiles-controller-service-account"
	katib   = "system:serviceaccount:kubeflow:katib-controller" // Katib's controller, guard.katibControllerServiceAccount's default
	// nsWriter may update namespaces, which none of Kubeflow's roles grants.
	nsWriter = "nina@example.com"
)

// widenedRules are what a careless admin might grant a member beyond kubeflow-edit: the guard
// must refuse them the waypoint all the same.
var widenedRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token", "pods/ephemeralcontainers", "pods/status", "pods/binding", "endpoints"}, Verbs: []string{"*"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"*"}},
	{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: []string{"*"}},
	{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"*"}},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, Verbs: []string{"*"}},
	{APIGroups: []string{"networking.istio.io", "extensions.istio.io", "security.istio.io", "gateway.networking.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
	// What the component roles aggregated into kubeflow-edit grant (PodDefaults, Notebooks,
	// Katib, Spark); testdata/kubeflow-roles holds only the core roles.
	{APIGroups: []string{"kubeflow.org", "sparkoperator.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
}

// server is the package's API server with the guard in force.
type server struct {
	env *envtest.Env
	cfg *config.Config
}

var (
	setupMu sync.Mutex
	shared  *server
	spaces  atomic.Int64
)

// guarded returns the package's API server, with Kubeflow's roles, a ClusterRole "widened" and
// the default guard in force; the platform's identities (istiod, kube-controller-manager, the
// ReplicaSet controller, the kubelets) may do anything RBAC decides, so that what refuses them
// can only be the guard.
func guarded(t *testing.T) *server {
	t.Helper()
	setupMu.Lock()
	defer setupMu.Unlock()
	if shared != nil {
		return shared
	}
	shared = guardedServer(t, envtest.Start(t), config.ModeAmbient)
	return shared
}

// guardedInSidecarMode is the package's server with the guard in sidecar mode (sidecarGuarded):
// the default PluginConfig's, but for one opt-out allowed in a namespace no other test uses.
func guardedInSidecarMode(t *testing.T) *server {
	t.Helper()
	return sidecarGuarded(t)
}

// guardedServer sets env up as guarded describes, with the guard of the default PluginConfig in
// mode.
func guardedServer(t *testing.T, env *envtest.Env, mode config.MeshMode) *server {
	t.Helper()
	ctx := context.Background()
	for _, r := range fixture.KubeflowRoles(t) {
		require.NoError(t, env.Client.Create(ctx, r))
	}
	require.NoError(t, env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widened"}, Rules: widenedRules}))
	require.NoError(t, env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "namespace-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}}}}))
	require.NoError(t, env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "guard-test-namespace-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "namespace-writer"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: nsWriter}}}))
	for i, s := range []rbacv1.Subject{
		{Kind: rbacv1.UserKind, Name: istiod}, {Kind: rbacv1.UserKind, Name: kcm}, {Kind: rbacv1.UserKind, Name: rsCtl}, {Kind: rbacv1.UserKind, Name: kfam},
		{Kind: rbacv1.UserKind, Name: katib}, {Kind: rbacv1.GroupKind, Name: "system:nodes"},
	} {
		require.NoError(t, env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("guard-test-platform-%d", i)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: s.Kind, Name: s.Name}},
		}))
	}
	cfg := config.Default()
	cfg.Mesh.Mode = mode
	cfg.Guard.MeshConfigAllowed = []config.MeshObject{{Kind: "EnvoyFilter", Name: "allowed-by-the-admin"}, {Kind: "Gateway", Name: "ingress"}}
	fixture.InstallGuard(t, env.Client, cfg)
	return &server{env: env, cfg: cfg}
}

// namespace is a managed namespace of the test's own, as the profiles controller makes one, with
// editor bound to kubeflow-edit, admin to kubeflow-admin and widened to both kubeflow-edit and
// widened.
func (s *server) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ctx := context.Background()
	ns := fmt.Sprintf("%s-%d", prefix, spaces.Add(1))
	require.NoError(t, s.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}))
	for _, b := range []struct{ user, role string }{{editor, "kubeflow-edit"}, {admin, "kubeflow-admin"}, {widened, "kubeflow-edit"}, {widened, "widened"}} {
		require.NoError(t, s.env.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: strings.NewReplacer("@", "-", ".", "-").Replace(b.user) + "-" + b.role, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: b.user}},
		}))
	}
	return ns
}

// as is a client acting as user; a node's user is in the group system:nodes, as a kubelet's is.
func (s *server) as(t *testing.T, user string) client.Client {
	t.Helper()
	var groups []string
	if strings.HasPrefix(user, "system:node:") {
		groups = append(groups, "system:nodes")
	}
	return fixture.As(t, s.env.Base, envtest.NewScheme(), user, groups...)
}

// members are the namespace's members whose requests the guard must refuse.
func members() []string { return []string{editor, admin, widened} }

// refusedBy asserts err is the guard's refusal by the check id (whose message opens with it),
// saying what to do.
func refusedBy(t *testing.T, err error, id string, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, append([]any{"admitted; want the guard's check " + id + " to refuse it: "}, msgAndArgs...)...)
	policy := "profile-plugins-guard-" + strings.SplitN(id, "/", 2)[0]
	assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy '"+policy+"'", msgAndArgs...)
	assert.Contains(t, err.Error(), "["+id+"]", msgAndArgs...)
	assert.Contains(t, err.Error(), "ask your platform admin", msgAndArgs...)
}

// refusedByOneOf asserts err is the guard's refusal by one of the checks ids: where several
// policies refuse a request, the API server reports the first it evaluated, in no fixed order.
func refusedByOneOf(t *testing.T, err error, ids []string, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, append([]any{"admitted; want one of the guard's checks %v to refuse it: ", ids}, msgAndArgs...)...)
	for _, id := range ids {
		if strings.Contains(err.Error(), "["+id+"]") {
			refusedBy(t, err, id, msgAndArgs...)
			return
		}
	}
	assert.Fail(t, "refused by another check than "+strings.Join(ids, ", "), append([]any{err.Error()}, msgAndArgs...)...)
}

// notTheGuards asserts that err, if any, is not the guard's refusal.
func notTheGuards(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	if err != nil {
		assert.NotContains(t, err.Error(), "profile-plugins-guard-", msgAndArgs...)
	}
}

// refusedByRBACOrGuard asserts that err refuses the request, by RBAC (Kubeflow's roles do not
// reach so far) or by the guard's check id.
func refusedByRBACOrGuard(t *testing.T, err error, id string, msgAndArgs ...any) {
	t.Helper()
	if err != nil && apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
		return
	}
	refusedBy(t, err, id, msgAndArgs...)
}

// connect sends the CONNECT request of a subresource (exec, attach, portforward, proxy) as user;
// the API server admits it before it looks for the pod or service, so a refusal is the guard's
// and any other answer is not.
func (s *server) connect(t *testing.T, user, ns, resource, name, sub string) error {
	t.Helper()
	cfg := rest.CopyConfig(s.env.Base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cfg.APIPath, cfg.GroupVersion = "/api", &corev1.SchemeGroupVersion
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	require.NoError(t, err)
	req := rc.Post().Namespace(ns).Resource(resource).Name(name).SubResource(sub)
	if sub == "exec" {
		req = req.Param("command", "sh").Param("stdout", "true")
	}
	return req.Do(context.Background()).Error()
}
