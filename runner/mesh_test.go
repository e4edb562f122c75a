package runner_test

// mesh is the fake cluster the scenario tests run on: controller-runtime's fake client with the
// real authz and waypoint plugins, whose writes can be watched and made to fail, and the steps an
// admin, istiod or a pod would take on it.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	writes []string // "apply Kind/name", "update Kind/name", "delete Kind/name", "patch Kind/name", "labels k1,k2"
	// fail, when set, decides whether the next write fails before it reaches the server.
	fail func(verb string, obj any) error
	// apiReads lists the reads sent past the Reader when selectedWiring is on (see selectedreads_test.go).
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
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return m.write("patch", obj, func() error { return c.Patch(ctx, obj, patch, opts...) })
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
	m.editNamespace("", func(n *corev1.Namespace) {
		n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: ns, UID: testProfile().UID, Controller: ptrTo(true)}}
	})
}

// editNamespace changes the namespace with an Update by manager, as another writer would.
func (m *mesh) editNamespace(manager string, edit func(*corev1.Namespace)) {
	m.t.Helper()
	n := &corev1.Namespace{}
	require.NoError(m.t, m.c.Get(context.Background(), client.ObjectKey{Name: ns}, n))
	edit(n)
	require.NoError(m.t, m.c.Update(context.Background(), n, client.FieldOwner(manager)))
}

// setAction changes the named policy's action with an Update by manager, as another writer would.
func (m *mesh) setAction(name string, action securityv1beta1.AuthorizationPolicy_Action, manager string) {
	m.t.Helper()
	p := m.policy(name)
	p.Spec.Action = action
	require.NoError(m.t, m.c.Update(context.Background(), p, client.FieldOwner(manager)))
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

// converged applies once more and checks that the call writes nothing: the mesh has reached its
// steady state. It returns the call's Result for what the caller checks further.
func (m *mesh) converged(msgAndArgs ...any) *runner.Result {
	m.t.Helper()
	m.writes = nil
	res := m.apply()
	require.NoError(m.t, res.Err())
	assert.Empty(m.t, m.writes, msgAndArgs...)
	return res
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

// failVerb makes the named write of the named object fail.
func failVerb(verb, what string) func(string, any) error {
	return func(v string, obj any) error {
		if v == verb && describe(obj) == what {
			return apierrors.NewServiceUnavailable("injected")
		}
		return nil
	}
}

func ptrTo[T any](v T) *T { return &v }

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

// withPatch switches on the opt-in per-namespace seccomp patch (mesh.waypoint.seccompPatch).
func (m *mesh) withPatch() *mesh {
	m.cfg.Mesh.Waypoint.SeccompPatch = ptrTo(true)
	m.configure(config.ModeAmbient)
	return m
}

func (m *mesh) configMap(name string) *corev1.ConfigMap {
	m.t.Helper()
	cm := &corev1.ConfigMap{}
	require.NoError(m.t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm))
	return cm
}
