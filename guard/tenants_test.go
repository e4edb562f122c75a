package guard_test

// What the tests of the guard against Kubeflow's webhooks and Istio's per-pod switches share: a
// second package server with the sidecar guard, Profiles' namespaces of the test's own, members
// bound to exactly the rules a test names, and the pods and objects they try.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

// optOutAllowedNamespace is the namespace whose pipeline-runner the sidecar server's guard lets
// opt out (guard.optOutAllowed); TestOptOutAllowedAndIstiodsWaypoint alone uses it.
const optOutAllowedNamespace = "optout-allowed"

var (
	sidecarMu     sync.Mutex
	sidecarShared *server
)

// sidecarGuarded returns the package's API server with the sidecar guard (a server of its own:
// the guard's policies are cluster-scoped), set up as guarded describes, with guard.optOutAllowed
// naming pipeline-runner in optOutAllowedNamespace.
func sidecarGuarded(t *testing.T) *server {
	t.Helper()
	sidecarMu.Lock()
	defer sidecarMu.Unlock()
	if sidecarShared != nil {
		return sidecarShared
	}
	s := guardedServer(t, envtest.StartNamed(t, "guard-sidecar"), config.ModeSidecar)
	s.cfg.Guard.OptOutAllowed = []config.OptOut{{Namespace: optOutAllowedNamespace, ServiceAccount: "pipeline-runner"}}
	require.NoError(t, s.cfg.Validate())
	objs, err := guard.Objects(s.cfg)
	require.NoError(t, err)
	ctx := context.Background()
	for _, o := range objs {
		cur := o.DeepCopyObject().(client.Object)
		require.NoError(t, s.env.Client.Get(ctx, client.ObjectKeyFromObject(o), cur))
		o.SetResourceVersion(cur.GetResourceVersion())
		require.NoError(t, s.env.Client.Update(ctx, o))
	}
	fixture.GuardInForce(t, s.env.Client)
	sidecarShared = s
	return s
}

// guardedIn is the package's server with the guard of mode.
func guardedIn(t *testing.T, mode config.MeshMode) *server {
	t.Helper()
	if mode == config.ModeSidecar {
		return sidecarGuarded(t)
	}
	return guarded(t)
}

// profileNamespace creates a Profile and its namespace named prefix-<n> (owned by annotation, as
// an admin would make it), and returns the name.
func profileNamespace(t *testing.T, s *server, prefix string) string {
	t.Helper()
	ctx := context.Background()
	const owner = "alice@example.com"
	name := fmt.Sprintf("%s-%d", prefix, spaces.Add(1))
	require.NoError(t, s.env.Client.Create(ctx, &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: profilev1.ProfileSpec{Owner: fixture.User(owner)}}))
	require.NoError(t, s.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{ownership.OwnerAnnotation: owner}}}))
	return name
}

// labelNamespace gives namespace ns the labels as the runner leaves them (system:masters is never
// refused).
func labelNamespace(t *testing.T, s *server, ns string, labels map[string]string) *corev1.Namespace {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Namespace{}
	require.NoError(t, s.env.Client.Get(ctx, client.ObjectKey{Name: ns}, n))
	n.Labels = labels
	require.NoError(t, s.env.Client.Update(ctx, n))
	return n
}

// userBinding is a RoleBinding of user alone, named name in ns.
func userBinding(ns, name, user string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
}

// contributorPodRules are kubeflow-edit's rules on pods (kubeflow-kubernetes-edit).
var contributorPodRules = []rbacv1.PolicyRule{{
	APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"},
}}

// bound binds binding's user in its namespace to a ClusterRole role holding rules (created unless
// there; role names are the tests' own) and returns a client that impersonates the user: what the
// test writes through it is what such a tenant may write.
func bound(t *testing.T, s *server, binding *rbacv1.RoleBinding, role string, rules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	ctx := context.Background()
	if err := s.env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}); !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
	require.NoError(t, s.env.Client.Create(ctx, binding))
	cfg := rest.CopyConfig(s.env.Base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: binding.Subjects[0].Name}
	c, err := client.New(cfg, client.Options{Scheme: s.env.Client.Scheme()})
	require.NoError(t, err)
	return c
}

// member binds editor in ns to role holding rules and returns its client.
func member(t *testing.T, s *server, ns, role string, rules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	return bound(t, s, userBinding(ns, "member-edit", editor), role, rules)
}

// replicaSetController is the ReplicaSet controller's client, bound in ns to create pods.
func replicaSetController(t *testing.T, s *server, ns string) client.Client {
	t.Helper()
	return bound(t, s, userBinding(ns, "replicaset-controller", rsCtl), "guard-test-replicaset-controller-pods", contributorPodRules)
}

// installCRD installs crd unless the server has it (tests in parallel share the server) and waits
// until the API server lists its objects (apiVersion, listKind) in ns.
func installCRD(t *testing.T, s *server, ns string, crd *unstructured.Unstructured, apiVersion, listKind string) {
	t.Helper()
	ctx := context.Background()
	if err := s.env.Client.Create(ctx, crd); !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(apiVersion)
		l.SetKind(listKind)
		return s.env.Client.List(ctx, l, client.InNamespace(ns)) == nil
	}, 30*time.Second, 200*time.Millisecond, "the %s CRD is served", listKind)
}

// crdMember installs crd and returns a kubeflow-edit member of ns bound, through the ClusterRole
// role, to rules and the pod rules.
func crdMember(t *testing.T, s *server, ns string, crd *unstructured.Unstructured, apiVersion, listKind, role string, rules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	installCRD(t, s, ns, crd, apiVersion, listKind)
	return member(t, s, ns, role, append(rules, contributorPodRules...))
}

// guardDenied asserts err is the guard's refusal by policy, with a message containing want.
func guardDenied(t *testing.T, err error, policy, want string) {
	t.Helper()
	require.Error(t, err, "admitted; want %s to refuse it", policy)
	assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy '"+policy+"'", "not the guard's refusal")
	assert.Contains(t, err.Error(), want)
	assert.Contains(t, err.Error(), "ask your platform admin")
}

// refusedByPolicy asserts err is a refusal by policy, what for saying what was tried.
func refusedByPolicy(t *testing.T, err error, policy, what string) {
	t.Helper()
	t.Logf("%s: %v", what, err)
	if assert.Error(t, err, "%s: admitted", what) {
		assert.Contains(t, err.Error(), policy, "%s: refused, but not by the guard", what)
	}
}

// awaitRefusal waits until create (a dry run) is refused by policy: each policy takes effect on
// its own, some time after the guard is installed.
func awaitRefusal(t *testing.T, create func() error, policy, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		err := create()
		return err != nil && strings.Contains(err.Error(), policy)
	}, 30*time.Second, 200*time.Millisecond, what)
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

// objectName is a valid object name made of a test case's description.
func objectName(desc string) string {
	return strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(desc), "-"), "-")
}

// podWith is a pod with annotations and containers named app and extra.
func podWith(annotations map[string]string, extra ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
	for _, c := range append([]string{"app"}, extra...) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "registry.example.com/" + c + ":1"})
	}
	return p
}

// injectedPod is a pod as Istio's injector leaves it with istio-cni (injection-template.yaml,
// pilot.cni.enabled): the sidecar-mode cases each change one thing of it, so each is refused for
// its own reason.
func injectedPod() *corev1.Pod {
	p := podWith(map[string]string{
		"sidecar.istio.io/status":                      `{"initContainers":["istio-validation"],"containers":["istio-proxy"]}`,
		"sidecar.istio.io/interceptionMode":            "REDIRECT",
		"traffic.sidecar.istio.io/includeInboundPorts": "*",
		"traffic.sidecar.istio.io/excludeInboundPorts": "15020",
		"istio.io/rev": "default",
	}, "istio-proxy")
	p.Spec.Containers[1].Args = []string{"proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local"}
	p.Spec.InitContainers = []corev1.Container{{Name: "istio-validation", Image: "registry.example.com/proxyv2:1",
		Args: []string{"istio-iptables", "--run-validation", "--skip-rule-apply"}}}
	return p
}

// injectedWith is injectedPod changed by change.
func injectedWith(change func(p *corev1.Pod)) *corev1.Pod {
	p := injectedPod()
	change(p)
	return p
}

// deploymentOf is a Deployment in ns whose pod template is p's metadata and spec.
func deploymentOf(ns, name string, p *corev1.Pod) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: sel},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: p.Annotations}, Spec: p.Spec},
	}}
}

// boundPod is a pod the scheduler has placed (spec.nodeName).
func boundPod(namespace, name string, privileged bool) *corev1.Pod {
	c := corev1.Container{Name: "app", Image: "registry.example.com/app:1"}
	if privileged {
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       corev1.PodSpec{NodeName: "node-1", TerminationGracePeriodSeconds: ptr.To[int64](30), Containers: []corev1.Container{c}},
	}
}

// namespaceLabels are the labels of namespace name.
func namespaceLabels(t *testing.T, c client.Client, name string) map[string]string {
	t.Helper()
	n := &corev1.Namespace{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: name}, n))
	return n.Labels
}

// createIfAbsent creates obj unless an object of its name exists: cluster-scoped objects of a
// test's own, which a run with -count above 1 meets again.
func createIfAbsent(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}
