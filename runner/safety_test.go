package runner_test

// These tests play each event of issue 13's "Why" against the runner with the real authz and
// waypoint plugins on controller-runtime's fake client, and check that the namespace stays
// protected: the safety model of the package doc.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

const (
	dataplaneMode      = "istio.io/dataplane-mode"
	useWaypoint        = "istio.io/use-waypoint"
	ingressUseWaypoint = "istio.io/ingress-use-waypoint"
	ztunnelName        = config.DefaultZtunnelPolicyName
	ownerName          = config.DefaultOwnerPolicyName
)

// mesh is a fake API server with the authz and waypoint plugins, whose writes can be made to fail.
type mesh struct {
	t      *testing.T
	c      client.WithWatch
	cfg    *config.Config
	runner *runner.Runner
	writes []string // "apply Kind/name", "update Kind/name", "delete Kind/name", "labels k1,k2"
	// fail, when set, decides whether the next write fails before it reaches the server.
	fail func(verb string, obj any) error
	// apiReads lists the reads sent past the Reader when selectedWiring is on (see reads_test.go).
	apiReads []string
}

func newMesh(t *testing.T, objs ...client.Object) *mesh {
	t.Helper()
	m := &mesh{t: t, cfg: config.Default()}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}
	base := fake.NewClientBuilder().
		WithScheme(runner.NewScheme()).
		WithReturnManagedFields().
		WithStatusSubresource(&gatewayv1.Gateway{}).
		WithObjects(append([]client.Object{namespace}, objs...)...).
		Build()
	m.c = interceptor.NewClient(base, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return m.write("apply", obj, func() error { return c.Apply(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return m.write("update", obj, func() error { return c.Update(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return m.write("delete", obj, func() error { return c.Delete(ctx, obj, opts...) })
		},
	})
	m.configure(config.ModeAmbient)
	return m
}

// configure switches the mesh mode, as a configuration change and restart would.
func (m *mesh) configure(mode config.MeshMode) {
	m.cfg.Mesh.Mode = mode
	r, err := runner.NewRunner(m.c, authz.New(m.cfg), waypoint.New(m.cfg))
	require.NoError(m.t, err)
	m.runner = r
	m.wireReads()
}

func (m *mesh) write(verb string, obj any, do func() error) error {
	m.writes = append(m.writes, verb+" "+describe(obj))
	if m.fail != nil {
		if err := m.fail(verb, obj); err != nil {
			return err
		}
	}
	return do()
}

func describe(obj any) string {
	switch o := obj.(type) {
	case *corev1ac.NamespaceApplyConfiguration:
		return "labels " + strings.Join(sortedKeys(o.Labels), ",")
	case interface {
		GetKind() string
		GetName() string
	}:
		return o.GetKind() + "/" + o.GetName()
	case client.Object:
		return o.GetObjectKind().GroupVersionKind().Kind + "/" + o.GetName()
	}
	return "?"
}

func sortedKeys(m map[string]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (m *mesh) apply() *runner.Result {
	m.t.Helper()
	return m.runner.Apply(context.Background(), testProfile())
}

func (m *mesh) labels() map[string]string {
	m.t.Helper()
	n := &corev1.Namespace{}
	require.NoError(m.t, m.c.Get(context.Background(), client.ObjectKey{Name: ns}, n))
	return n.Labels
}

func (m *mesh) policy(name string) *istiosecurityv1.AuthorizationPolicy {
	m.t.Helper()
	p := &istiosecurityv1.AuthorizationPolicy{}
	if err := m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); apierrors.IsNotFound(err) {
		return nil
	} else {
		require.NoError(m.t, err)
	}
	return p
}

// controlledByProfile makes the test Profile the namespace's controller, as the profiles
// controller does for the namespaces it creates.
func (m *mesh) controlledByProfile() {
	m.t.Helper()
	n := &corev1.Namespace{}
	require.NoError(m.t, m.c.Get(context.Background(), client.ObjectKey{Name: ns}, n))
	n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: ns, UID: testProfile().UID, Controller: ptrTo(true)}}
	require.NoError(m.t, m.c.Update(context.Background(), n))
}

// program plays istiod: the waypoint Gateway becomes Programmed for its generation.
func (m *mesh) program() {
	m.t.Helper()
	gw := &gatewayv1.Gateway{}
	require.NoError(m.t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: m.cfg.Mesh.Waypoint.Name}, gw))
	gw.Status.Conditions = []metav1.Condition{{
		Type: string(gatewayv1.GatewayConditionProgrammed), Status: metav1.ConditionTrue, Reason: "Programmed",
		ObservedGeneration: gw.Generation, LastTransitionTime: metav1.Now(),
	}}
	gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Value: "waypoint." + ns + ".svc"}}
	require.NoError(m.t, m.c.Status().Update(context.Background(), gw, client.FieldOwner("istiod")))
}

// enrol runs the mesh to its steady state: enrolled in ambient and routed through the waypoint.
func (m *mesh) enrol() {
	m.t.Helper()
	require.NoError(m.t, m.apply().Err())
	m.program()
	require.NoError(m.t, m.apply().Err())
	labels := m.labels()
	require.Equal(m.t, "ambient", labels[dataplaneMode])
	require.Equal(m.t, m.cfg.Mesh.Waypoint.Name, labels[useWaypoint])
	require.Equal(m.t, "true", labels[ingressUseWaypoint])
	m.writes = nil
}

func (m *mesh) addPod(name string, annotations map[string]string) {
	m.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	require.NoError(m.t, m.c.Create(context.Background(), pod))
}

func (m *mesh) deletePod(name string) {
	m.t.Helper()
	require.NoError(m.t, m.c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}))
}

// failPolicyWrites makes every write of the named AuthorizationPolicy fail.
func failPolicyWrites(name string) func(string, any) error {
	return func(verb string, obj any) error {
		if describe(obj) == "AuthorizationPolicy/"+name {
			return apierrors.NewServiceUnavailable("injected")
		}
		return nil
	}
}

func enrolled(t *testing.T, labels map[string]string) {
	t.Helper()
	assert.Equal(t, "ambient", labels[dataplaneMode], "must stay in ambient")
	assert.Equal(t, "waypoint", labels[useWaypoint], "must stay routed through the waypoint")
	assert.Equal(t, "true", labels[ingressUseWaypoint])
}

// restoredNotRouted: a call that restored another writer's change of an object the routing labels
// require keeps the pods in ambient but withholds routing: what istiod runs may still be the
// changed version. The next call routes again.
func restoredNotRouted(t *testing.T, labels map[string]string) {
	t.Helper()
	assert.Equal(t, "ambient", labels[dataplaneMode], "must stay in ambient")
	assert.NotContains(t, labels, useWaypoint, "routed while the restored version may not be in effect")
	assert.NotContains(t, labels, ingressUseWaypoint, "routed while the restored version may not be in effect")
}

// failingAuthz is the authz plugin with a generation that fails, as a plugin fails on input it
// cannot turn into any safe state.
type failingAuthz struct{ plugin.Plugin }

func (failingAuthz) Generate(plugin.Target) (plugin.Desired, error) {
	return plugin.Desired{}, errors.New("cannot generate")
}

// failAuthz makes the mesh's authz plugin fail from now on.
func (m *mesh) failAuthz() {
	m.t.Helper()
	r, err := runner.NewRunner(m.c, failingAuthz{authz.New(m.cfg)}, waypoint.New(m.cfg))
	require.NoError(m.t, err)
	m.runner = r
	m.wireReads()
}

// A plugin whose generation fails touches nothing of its own. Its policies still stand, so
// nothing is withdrawn and nothing is written; before the fix the namespace left ambient and the
// waypoint.
func TestFailedPluginKeepsEnrolment(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.failAuthz()
	res := m.apply()
	require.ErrorContains(t, res.Err(), "plugin authz")
	enrolled(t, m.labels())
	assert.Empty(t, m.writes, "a failed plugin must not unlabel, prune or rewrite")
	assert.NotNil(t, m.policy(ztunnelName))
	assert.NotNil(t, m.policy(ownerName))
}

// An invalid Profile edit (the owner "alice@example.com " with a trailing space) keeps the
// namespace enrolled and protected, and leaves access with nobody: the owner policy loses the
// old owner's rule, and only that policy is written.
func TestInvalidOwnerKeepsProtectionAndAdmitsNoUser(t *testing.T) {
	m := newMesh(t)
	m.controlledByProfile() // so an owner edit does not make the namespace someone else's
	m.enrol()
	p := testProfile()
	p.Spec.Owner.Name = "alice@example.com "
	res := m.runner.Apply(context.Background(), p)
	require.ErrorContains(t, res.Err(), "spec.owner.name")
	assert.False(t, res.Retryable(), "an input error")
	enrolled(t, m.labels())
	assert.Equal(t, []string{"apply AuthorizationPolicy/" + ownerName}, m.writes)
	owner := m.policy(ownerName)
	require.NotNil(t, owner)
	assert.NotEmpty(t, owner.Spec.TargetRefs)
	for _, r := range owner.Spec.Rules {
		for _, c := range r.When {
			assert.NotContains(t, c.Key, "request.headers", "no user rule while the owner is refused")
		}
	}
	assert.NotNil(t, m.policy(ztunnelName))
}

// A failed plugin's object counts as what it is: once another writer changed its spec (or it is
// gone), the routing labels that require it come off; a failed plugin cannot restore it.
func TestFailedPluginsDamagedObjectDoesNotKeepRouting(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	owner := m.policy(ownerName)
	owner.Spec.Action = securityv1beta1.AuthorizationPolicy_AUDIT
	require.NoError(t, m.c.Update(context.Background(), owner, client.FieldOwner("kubectl-edit")))

	m.failAuthz()
	res := m.apply()
	require.Error(t, res.Err())
	labels := m.labels()
	assert.NotContains(t, labels, useWaypoint)
	assert.NotContains(t, labels, ingressUseWaypoint)
	assert.Equal(t, "ambient", labels[dataplaneMode], "the ztunnel policy is intact")
	assert.Contains(t, strings.Join(res.Waiting(), "\n"), "AuthorizationPolicy.security.istio.io/"+ownerName+" was changed by another writer (kubectl-edit set spec.action)")

	// Gone altogether: the same.
	m2 := newMesh(t)
	m2.enrol()
	require.NoError(t, m2.c.Delete(context.Background(), m2.policy(ownerName)))
	m2.failAuthz()
	require.Error(t, m2.apply().Err())
	assert.NotContains(t, m2.labels(), useWaypoint)
	assert.Equal(t, "ambient", m2.labels()[dataplaneMode])
}

// A legacy owner policy of another writer under the plugin's name (adoptOwnerPolicy false) is a
// conflict: the waypoint would have no owner policy, so nothing is routed to it.
func TestLegacyOwnerPolicyBlocksUseWaypoint(t *testing.T) {
	legacy := &istiosecurityv1.AuthorizationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ownerName, Namespace: ns, Annotations: map[string]string{"user": "alice@example.com", "role": "admin"}},
		Spec:       securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{}}},
	}
	m := newMesh(t, legacy)
	require.Error(t, m.apply().Err())
	res := m.apply()
	var conflict *runner.ConflictError
	require.ErrorAs(t, res.Err(), &conflict)
	labels := m.labels()
	assert.Equal(t, "ambient", labels[dataplaneMode], "the ztunnel policy protects, so the namespace is enrolled")
	assert.NotContains(t, labels, useWaypoint)
	assert.NotContains(t, labels, ingressUseWaypoint)
	assert.Error(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, &gatewayv1.Gateway{}), "no waypoint to route through")
	assert.Contains(t, res.Waiting(), "waypoint: waiting for waypoint: Gateway "+ns+"/waypoint is not made until AuthorizationPolicy "+ownerName+
		", which another writer made, is replaced by the plugin's, so that it never serves without its owner policy")
}

// The same conflict arising later (someone replaces the plugin's owner policy) withdraws routing.
func TestReplacedOwnerPolicyWithdrawsUseWaypoint(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ownerName)))
	require.NoError(t, m.c.Create(context.Background(), &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ownerName, Namespace: ns}}))
	require.Error(t, m.apply().Err())
	assert.NotContains(t, m.labels(), useWaypoint)
	assert.Equal(t, "ambient", m.labels()[dataplaneMode])
}

// A conflict on an object that no enrolment label requires takes nothing down: here a
// contributor's policy, whose name another of this library's plugins holds. (The waypoint's
// seccomp ConfigMap is no such object: the routing labels require it.)
func TestUnrelatedConflictKeepsEnrolment(t *testing.T) {
	m := newMesh(t)
	m.cfg.Authorization.Contributors = config.ContributorsByPlugin
	m.enrol()
	bob := authz.ContributorPolicyName("bob@example.com", authz.RoleEdit)
	require.NoError(t, m.c.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: bob, Namespace: ns, Annotations: map[string]string{authz.UserAnnotation: "bob@example.com", authz.RoleAnnotation: authz.RoleEdit}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kubeflow-edit"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "bob@example.com"}},
	}))
	require.NoError(t, m.c.Create(context.Background(), &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: bob, Namespace: ns,
		Labels: map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: waypoint.PluginName}}}))
	res := m.apply()
	var conflict *runner.ConflictError
	require.ErrorAs(t, res.Err(), &conflict)
	enrolled(t, m.labels())
}

// A foreign object holding the ztunnel policy's name: while pods run in ambient the namespace
// stays there (leaving would take them out of every data plane) and the runner says why; with no
// pod, it is withdrawn and the label waits.
func TestConflictOnTheZtunnelName(t *testing.T) {
	for _, withPod := range []bool{true, false} {
		t.Run(map[bool]string{true: "pod running", false: "no pod"}[withPod], func(t *testing.T) {
			m := newMesh(t)
			m.enrol()
			if withPod {
				m.addPod("app", nil)
			}
			require.NoError(t, m.c.Delete(context.Background(), m.policy(ztunnelName)))
			require.NoError(t, m.c.Create(context.Background(), &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ztunnelName, Namespace: ns}}))
			res := m.apply()
			var conflict *runner.ConflictError
			require.ErrorAs(t, res.Err(), &conflict)
			labels := m.labels()
			assert.NotContains(t, labels, useWaypoint, "the waypoint requires the ztunnel policy")
			if withPod {
				assert.Equal(t, "ambient", labels[dataplaneMode])
				assert.Contains(t, strings.Join(res.Warnings(), "\n"),
					"label istio.io/dataplane-mode=ambient stays although AuthorizationPolicy.security.istio.io/"+ztunnelName+" exists and was made by another writer: 1 running pod(s) would otherwise be outside every data plane: app")
			} else {
				assert.NotContains(t, labels, dataplaneMode)
				assert.Contains(t, res.Waiting(), "waypoint: label istio.io/dataplane-mode withheld: AuthorizationPolicy.security.istio.io/"+ztunnelName+" exists and was made by another writer")
			}
		})
	}
}

// The ztunnel policy is deleted and re-creating it fails. Pods in ambient stay there (mTLS and
// the waypoint's owner policy still apply); once writes succeed, one Apply restores everything.
func TestFailedRecreateOfADeletedZtunnelPolicy(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.addPod("app", nil)
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ztunnelName)))
	m.fail = failPolicyWrites(ztunnelName)
	res := m.apply()
	require.ErrorContains(t, res.Err(), "applying AuthorizationPolicy.security.istio.io/"+ztunnelName)
	assert.True(t, res.Retryable())
	labels := m.labels()
	assert.Equal(t, "ambient", labels[dataplaneMode], "pods must not leave the mesh because a write failed")
	assert.NotContains(t, labels, useWaypoint, "the waypoint requires the ztunnel policy")
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "does not exist and creating it failed")

	m.fail = nil
	require.NoError(t, m.apply().Err())
	assert.NotNil(t, m.policy(ztunnelName))
	enrolled(t, m.labels())
}

// Without pods the label follows its requirement: no ztunnel policy, no enrolment.
func TestFailedRecreateWithoutPodsUnenrols(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ztunnelName)))
	m.fail = failPolicyWrites(ztunnelName)
	require.Error(t, m.apply().Err())
	assert.NotContains(t, m.labels(), dataplaneMode)
	m.fail = nil
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
}

// A failed update of a policy that stands keeps every label: the earlier version still protects.
func TestFailedUpdateOfAStandingPolicyKeepsLabels(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.cfg.Authorization.L4Exceptions = []config.L4Exception{{Namespaces: []string{"monitoring"}}}
	m.fail = failPolicyWrites(ztunnelName)
	require.Error(t, m.apply().Err())
	enrolled(t, m.labels())
}

// Another writer switches the ztunnel policy to AUDIT, adds a selector or targetRefs: each makes
// istiod stop enforcing it at ztunnel. The runner restores exactly the desired spec, names the
// other field manager, keeps dataplane-mode, withholds routing for the call, routes again on the
// next, and is quiet after.
func TestDriftOfTheZtunnelPolicyIsRestoredAndReported(t *testing.T) {
	cases := map[string]func(*istiosecurityv1.AuthorizationPolicy){
		"action AUDIT": func(p *istiosecurityv1.AuthorizationPolicy) {
			p.Spec.Action = securityv1beta1.AuthorizationPolicy_AUDIT
		},
		"action DENY": func(p *istiosecurityv1.AuthorizationPolicy) { p.Spec.Action = securityv1beta1.AuthorizationPolicy_DENY },
		"selector": func(p *istiosecurityv1.AuthorizationPolicy) {
			p.Spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "nothing"}}
		},
		"targetRefs": func(p *istiosecurityv1.AuthorizationPolicy) {
			p.Spec.TargetRefs = []*typev1beta1.PolicyTargetReference{{Kind: "Service", Name: "nothing"}}
		},
		"extra rule": func(p *istiosecurityv1.AuthorizationPolicy) {
			p.Spec.Rules = append(p.Spec.Rules, &securityv1beta1.Rule{})
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			m := newMesh(t)
			m.enrol()
			want := m.policy(ztunnelName).Spec.DeepCopy()
			pol := m.policy(ztunnelName)
			change(pol)
			require.NoError(t, m.c.Update(context.Background(), pol, client.FieldOwner("gitops")))

			res := m.apply()
			require.NoError(t, res.Err())
			assert.Contains(t, strings.Join(res.Warnings(), "\n"), "AuthorizationPolicy.security.istio.io/"+ztunnelName+" was changed by another writer (gitops set spec.")
			got := m.policy(ztunnelName)
			assert.Equal(t, want.String(), got.Spec.String(), "exactly the desired spec")
			restoredNotRouted(t, m.labels())
			require.NoError(t, m.apply().Err())
			enrolled(t, m.labels())

			m.writes = nil
			res = m.apply()
			require.NoError(t, res.Err())
			assert.Empty(t, m.writes, "restored once, quiet after")
			assert.Empty(t, res.Warnings())
		})
	}
}

// Server-side apply by another manager that forces a field away from the plugin is drift too.
func TestForcedApplyOfAnotherManagerIsRestored(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
		"metadata": map[string]any{"name": ownerName, "namespace": ns},
		"spec":     map[string]any{"action": "AUDIT"},
	}}
	require.NoError(t, m.c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("argocd"), client.ForceOwnership))
	res := m.apply()
	require.NoError(t, res.Err())
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "argocd set spec.action")
	assert.Equal(t, securityv1beta1.AuthorizationPolicy_ALLOW, m.policy(ownerName).Spec.Action)
	restoredNotRouted(t, m.labels())
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
	m.writes = nil
	require.NoError(t, m.apply().Err())
	assert.Empty(t, m.writes)
}

// When the restore fails, the drifted object does not protect: routing comes off at once, and
// dataplane-mode stays only for running pods.
func TestFailedRestoreWithdrawsRouting(t *testing.T) {
	for _, withPod := range []bool{true, false} {
		m := newMesh(t)
		m.enrol()
		if withPod {
			m.addPod("app", nil)
		}
		pol := m.policy(ztunnelName)
		pol.Spec.Action = securityv1beta1.AuthorizationPolicy_AUDIT
		require.NoError(t, m.c.Update(context.Background(), pol, client.FieldOwner("gitops")))
		m.fail = failPolicyWrites(ztunnelName)
		res := m.apply()
		require.ErrorContains(t, res.Err(), "restoring AuthorizationPolicy.security.istio.io/"+ztunnelName)
		labels := m.labels()
		assert.NotContains(t, labels, useWaypoint)
		assert.NotContains(t, labels, ingressUseWaypoint)
		if withPod {
			assert.Equal(t, "ambient", labels[dataplaneMode])
		} else {
			assert.NotContains(t, labels, dataplaneMode)
		}
		m.fail = nil
		require.NoError(t, m.apply().Err())
		assert.Equal(t, securityv1beta1.AuthorizationPolicy_ALLOW, m.policy(ztunnelName).Spec.Action)
		assert.Equal(t, "ambient", m.labels()[dataplaneMode])
	}
}

// The restore is an Update with the observed resourceVersion as precondition: it never overwrites
// a version the runner did not see.
func TestRestoreUsesAResourceVersionPrecondition(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	pol := m.policy(ztunnelName)
	pol.Spec.Action = securityv1beta1.AuthorizationPolicy_AUDIT
	require.NoError(t, m.c.Update(context.Background(), pol, client.FieldOwner("gitops")))
	var sentRV string
	m.fail = func(verb string, obj any) error {
		if u, ok := obj.(*unstructured.Unstructured); ok && verb == "update" {
			sentRV = u.GetResourceVersion()
		}
		return nil
	}
	require.NoError(t, m.apply().Err())
	assert.Equal(t, pol.ResourceVersion, sentRV)
	assert.Contains(t, m.writes, "update AuthorizationPolicy/"+ztunnelName)
}

// Drift of the waypoint Gateway (an extra listener, another class, infrastructure) is restored the
// same way.
func TestDriftOfTheWaypointIsRestored(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	gw := &gatewayv1.Gateway{}
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
	want := gw.Spec.DeepCopy()
	gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{Name: "open", Port: 80, Protocol: gatewayv1.HTTPProtocolType})
	require.NoError(t, m.c.Update(context.Background(), gw, client.FieldOwner("kubectl-edit")))
	res := m.apply()
	require.NoError(t, res.Err())
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "Gateway.gateway.networking.k8s.io/waypoint was changed by another writer (kubectl-edit set spec.listeners")
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
	assert.Equal(t, want.Listeners, gw.Spec.Listeners)
	assert.NotEmpty(t, gw.Status.Conditions, "istiod's status survives the restore")
}

// A namespace that another writer put in ambient while the ztunnel policy cannot exist is
// reported, not passed over in silence.
func TestForeignAmbientLabelWithoutZtunnelPolicyIsReported(t *testing.T) {
	foreign := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ztunnelName, Namespace: ns}}
	m := newMesh(t, foreign)
	n := &corev1.Namespace{}
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Name: ns}, n))
	n.Labels = map[string]string{dataplaneMode: "ambient"}
	require.NoError(t, m.c.Update(context.Background(), n, client.FieldOwner("kubectl-label")))
	res := m.apply()
	assert.Contains(t, strings.Join(res.Warnings(), "\n"),
		"namespace label istio.io/dataplane-mode=ambient was set by kubectl-label although AuthorizationPolicy.security.istio.io/"+ztunnelName+" exists and was made by another writer")
}

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
		n := &corev1.Namespace{}
		require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Name: ns}, n))
		n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: ns, UID: testProfile().UID, Controller: ptrTo(true)}}
		require.NoError(t, m.c.Update(context.Background(), n))
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
		n := &corev1.Namespace{}
		require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Name: ns}, n))
		n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Thing", Name: "x", UID: "other", Controller: ptrTo(true)}}
		require.NoError(t, m.c.Update(context.Background(), n))
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
		n := &corev1.Namespace{}
		require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Name: ns}, n))
		n.Finalizers = []string{"test/keep"}
		require.NoError(t, m.c.Update(context.Background(), n))
		require.NoError(t, m.c.Delete(context.Background(), n))
		res := m.runner.Revoke(context.Background(), testProfile())
		require.NoError(t, res.Err())
		assert.Empty(t, res.Waiting())
	})
}

// A switch to sidecar mode keeps ambient enrolment and the ztunnel policy while a pod without a
// sidecar runs, and says so; once the pod is back with a sidecar, ambient goes.
func TestSidecarSwitchWaitsForPods(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.addPod("app", nil)
	m.configure(config.ModeSidecar)
	res := m.apply()
	require.NoError(t, res.Err())
	labels := m.labels()
	assert.Equal(t, "ambient", labels[dataplaneMode])
	assert.Equal(t, "enabled", labels["istio-injection"], "new pods get a sidecar")
	assert.NotContains(t, labels, useWaypoint)
	assert.NotNil(t, m.policy(ztunnelName))
	assert.Contains(t, strings.Join(res.Waiting(), "\n"), "keeps istio.io/dataplane-mode=ambient and the objects it requires until no pod depends on it (restart the pods into the new data plane or delete them); 1 running pod(s) would otherwise be outside every data plane: app")

	for _, w := range m.writes {
		if strings.HasPrefix(w, "apply labels") {
			assert.Contains(t, w, dataplaneMode, "ambient must never be withdrawn while the pod runs, not even for a moment")
		}
	}

	// While it stands, the ztunnel policy is still kept intact.
	pol := m.policy(ztunnelName)
	pol.Spec.Action = securityv1beta1.AuthorizationPolicy_AUDIT
	require.NoError(t, m.c.Update(context.Background(), pol, client.FieldOwner("gitops")))
	require.NoError(t, m.apply().Err())
	assert.Equal(t, securityv1beta1.AuthorizationPolicy_ALLOW, m.policy(ztunnelName).Spec.Action)

	m.deletePod("app")
	m.writes = nil
	m.addPod("app-restarted", map[string]string{"sidecar.istio.io/status": `{"containers":["istio-proxy"]}`})
	res = m.apply()
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting())
	assert.NotContains(t, m.labels(), dataplaneMode)
	assert.Nil(t, m.policy(ztunnelName))
	labelsAt := slices.IndexFunc(m.writes, func(w string) bool {
		return strings.HasPrefix(w, "apply labels") && !strings.Contains(w, dataplaneMode)
	})
	policyAt := slices.Index(m.writes, "delete AuthorizationPolicy/"+ztunnelName)
	assert.True(t, labelsAt >= 0 && labelsAt < policyAt, "the label goes before its policy: %v", m.writes)
}

func ptrTo[T any](v T) *T { return &v }

// After a restore, the plugin's own Update holds the fields it put back. When the plugin later
// stops setting one of them (the owner policy loses its targetRefs in sidecar mode), apply alone
// would leave it; the runner sees it and converges within three calls, then stays quiet.
func TestFieldsOfARestoreGoWhenThePluginStopsSettingThem(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	pol := m.policy(ownerName)
	pol.Spec.TargetRefs[0].Name = "elsewhere"
	require.NoError(t, m.c.Update(context.Background(), pol, client.FieldOwner("gitops")))
	require.NoError(t, m.apply().Err())
	require.Equal(t, "waypoint", m.policy(ownerName).Spec.TargetRefs[0].Name)

	m.configure(config.ModeSidecar)
	var warnings []string
	for range 3 {
		res := m.apply()
		require.NoError(t, res.Err())
		warnings = append(warnings, res.Warnings()...)
	}
	assert.Empty(t, m.policy(ownerName).Spec.TargetRefs)
	assert.NotContains(t, strings.Join(warnings, "\n"), "another writer", "the plugin's own Update is no other writer")
	m.writes = nil
	require.NoError(t, m.apply().Err())
	assert.Empty(t, m.writes)
}

// failVerb makes the named write of the named object fail.
func failVerb(verb, what string) func(string, any) error {
	return func(v string, obj any) error {
		if v == verb && describe(obj) == what {
			return apierrors.NewServiceUnavailable("injected")
		}
		return nil
	}
}

// The restore succeeded but taking ownership back failed: the spec is exactly the desired one,
// so dataplane-mode stays; routing waits for the next call, as after any restore.
func TestRestoredButNotReownedKeepsLabels(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	pol := m.policy(ztunnelName)
	pol.Spec.Action = securityv1beta1.AuthorizationPolicy_AUDIT
	require.NoError(t, m.c.Update(context.Background(), pol, client.FieldOwner("gitops")))
	m.fail = failVerb("apply", "AuthorizationPolicy/"+ztunnelName)
	require.Error(t, m.apply().Err())
	assert.Equal(t, securityv1beta1.AuthorizationPolicy_ALLOW, m.policy(ztunnelName).Spec.Action)
	restoredNotRouted(t, m.labels())
	m.fail = nil
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
	m.writes = nil
	require.NoError(t, m.apply().Err())
	assert.Empty(t, m.writes)
}

// Adopting a legacy owner policy fails: it is not the plugin's, so nothing is routed to the waypoint.
func TestFailedAdoptionWithholdsUseWaypoint(t *testing.T) {
	legacy := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ownerName, Namespace: ns}}
	m := newMesh(t, legacy)
	m.cfg.Authorization.AdoptOwnerPolicy = true
	m.fail = func(verb string, obj any) error {
		if describe(obj) == "AuthorizationPolicy/"+ownerName {
			return apierrors.NewServiceUnavailable("injected")
		}
		return nil
	}
	require.Error(t, m.apply().Err())
	res := m.apply()
	require.Error(t, res.Err())
	assert.NotContains(t, m.labels(), useWaypoint)
	assert.Contains(t, res.Waiting(), "waypoint: waiting for waypoint: Gateway "+ns+"/waypoint is not made until AuthorizationPolicy "+ownerName+
		" is attached to it, so that it never serves without its owner policy")
	assert.Equal(t, "ambient", m.labels()[dataplaneMode])

	m.fail = nil
	res = m.apply()
	require.NoError(t, res.Err())
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "adopted AuthorizationPolicy.security.istio.io/"+ownerName)
	require.NoError(t, m.apply().Err(), "the Gateway is made once the adopted owner policy is attached to it")
	m.program()
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
}

// Adoption restores the legacy policy to exactly the desired spec and marks it as the plugin's in
// one Update; when only the apply after it fails, the policy already protects. Routing, which the
// legacy policy's content reached until istiod has the adopted one, waits for the next call.
func TestAdoptionRestoredButNotReowned(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ownerName)))
	m.cfg.Authorization.AdoptOwnerPolicy = true
	legacy := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ownerName, Namespace: ns},
		Spec: securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{}}}}
	require.NoError(t, m.c.Create(context.Background(), legacy, client.FieldOwner("kfam")))
	m.fail = failVerb("apply", "AuthorizationPolicy/"+ownerName)
	res := m.apply()
	require.Error(t, res.Err())
	warnings := strings.Join(res.Warnings(), "\n")
	assert.Contains(t, warnings, "adopted AuthorizationPolicy.security.istio.io/"+ownerName)
	assert.NotContains(t, warnings, "changed by another writer", "adoption is not drift")
	got := m.policy(ownerName)
	assert.True(t, plugin.IsManagedBy(got.Labels, "authz"))
	assert.NotEmpty(t, got.Spec.TargetRefs, "the desired spec")
	restoredNotRouted(t, m.labels())
	m.fail = nil
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
}

// The authz plugin only reads RoleBindings: one labelled as the plugin's by someone else is not
// pruned, though every other object so labelled and unwanted would be.
func TestReadOnlyKindsAreNeverPruned(t *testing.T) {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "namespaceAdmin", Namespace: ns, Labels: map[string]string{
			plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "authz"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kubeflow-admin"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice@example.com"}},
	}
	m := newMesh(t, rb)
	require.NoError(t, m.apply().Err())
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKeyFromObject(rb), &rbacv1.RoleBinding{}))
	assert.NotContains(t, m.writes, "delete RoleBinding/namespaceAdmin")
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

// Found by the property test: a namespace not routed yet, whose Programmed waypoint exists, meets
// another writer's owner policy without targetRefs while its ztunnel policy is drifted. With
// adoptOwnerPolicy the access plugin takes the policy over in its sidecar form (the ztunnel
// policy is not intact), and the requirement check after that write finds it "as wanted": the
// waypoint plugin must not route through a waypoint no owner policy is attached to.
func TestAdoptedDetachedOwnerPolicyIsNotRoutedTo(t *testing.T) {
	m := newMesh(t)
	require.NoError(t, m.apply().Err())
	m.program()
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ownerName)))
	legacy := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ownerName, Namespace: ns},
		Spec: securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{}}}}
	require.NoError(t, m.c.Create(context.Background(), legacy, client.FieldOwner("kfam")))
	z := m.policy(ztunnelName)
	z.Spec.Action = securityv1beta1.AuthorizationPolicy_AUDIT
	require.NoError(t, m.c.Update(context.Background(), z, client.FieldOwner("kubectl-edit")))
	m.cfg.Authorization.AdoptOwnerPolicy = true
	m.configure(config.ModeAmbient)

	for i := range 4 {
		m.apply()
		m.program()
		if m.labels()[useWaypoint] != "" || m.labels()[ingressUseWaypoint] != "" {
			assert.NotEmpty(t, m.policy(ownerName).Spec.TargetRefs, "call %d routed to a waypoint no owner policy is attached to", i+1)
		}
	}
	enrolled(t, m.labels())
	assert.NotEmpty(t, m.policy(ownerName).Spec.TargetRefs)
}

// Found by the property test: the waypoint Gateway is judged ready by its observed status, which
// describes the generation before any change the runner writes in the same call (here the
// Gateway's infrastructure labels change; in the property test an editor's parametersRef was
// dropped while the plugin's patch ConfigMap was missing). Routing waits for the next call, when
// istiod has programmed the written generation; the pods stay in ambient meanwhile.
func TestAGatewayChangedInTheCallIsNotRoutedToInThatCall(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.cfg.Mesh.Waypoint.Labels = map[string]string{"team": "ml"}
	m.configure(config.ModeAmbient)

	res := m.apply()
	require.NoError(t, res.Err())
	assert.Contains(t, m.writes, "apply Gateway/"+m.cfg.Mesh.Waypoint.Name)
	labels := m.labels()
	assert.Empty(t, labels[useWaypoint], "routed by a status of the previous generation")
	assert.Empty(t, labels[ingressUseWaypoint])
	assert.Equal(t, "ambient", labels[dataplaneMode], "the pods stay in ambient")
	assert.Contains(t, strings.Join(res.Waiting(), "\n"), "was changed in this call")

	m.program()
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
}
