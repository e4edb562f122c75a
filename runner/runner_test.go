package runner_test

import (
	"context"
	"errors"
	"sort"
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

const ns = "alice"

// testPlugin emits what its fields say; tests change them between calls like a config change.
type testPlugin struct {
	name     string
	objects  func(t plugin.Target) []client.Object
	labels   map[string]string
	requires map[string][]plugin.Ref
	err      error
}

func (p *testPlugin) Name() string { return p.name }
func (p *testPlugin) Kinds() []client.ObjectList {
	return []client.ObjectList{&corev1.ConfigMapList{}, &istiosecurityv1.AuthorizationPolicyList{}}
}
func (p *testPlugin) Generate(t plugin.Target) (plugin.Desired, error) {
	if p.err != nil {
		return plugin.Desired{}, p.err
	}
	d := plugin.Desired{Labels: p.labels, LabelRequires: p.requires}
	if p.objects != nil {
		d.Objects = p.objects(t)
	}
	return d, nil
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
}

func policy(name string, namespaces ...string) *istiosecurityv1.AuthorizationPolicy {
	return &istiosecurityv1.AuthorizationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: securityv1beta1.AuthorizationPolicy{
			Action: securityv1beta1.AuthorizationPolicy_ALLOW,
			Rules: []*securityv1beta1.Rule{{From: []*securityv1beta1.Rule_From{{
				Source: &securityv1beta1.Source{Namespaces: namespaces},
			}}}},
		},
	}
}

var policyRef = func(name string) plugin.Ref {
	return plugin.Ref{GroupKind: schema.GroupKind{Group: "security.istio.io", Kind: "AuthorizationPolicy"}, Name: name}
}

func testProfile() *profilev1.Profile {
	return &profilev1.Profile{
		ObjectMeta: metav1.ObjectMeta{Name: ns, UID: "1111-2222"},
		Spec:       profilev1.ProfileSpec{Owner: fixture.User("alice@example.com")},
	}
}

// controlledByTestProfile sets testProfile() as obj's controller, as the runner does on what it
// writes: with the managed labels, that makes obj the plugins' own.
func controlledByTestProfile[T client.Object](obj T) T {
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: ns,
		UID: testProfile().UID, Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}})
	return obj
}

// env is a fake API server that counts writes.
type env struct {
	client.Client
	writes int
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	e := &env{}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": "ml"},
		Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}
	e.Client = fake.NewClientBuilder().
		WithScheme(runner.NewScheme()).
		WithReturnManagedFields().
		WithObjects(append([]client.Object{namespace}, objs...)...).
		WithInterceptorFuncs(interceptor.Funcs{
			Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
				e.writes++
				return c.Apply(ctx, obj, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				e.writes++
				return c.Delete(ctx, obj, opts...)
			},
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				e.writes++
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				e.writes++
				return c.Update(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				e.writes++
				return c.Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	return e
}

func (e *env) namespace(t *testing.T) *corev1.Namespace {
	t.Helper()
	n := &corev1.Namespace{}
	require.NoError(t, e.Get(context.Background(), client.ObjectKey{Name: ns}, n))
	return n
}

func newRunner(t *testing.T, c client.Client, plugins ...plugin.Plugin) *runner.Runner {
	t.Helper()
	r, err := runner.NewRunner(c, plugins...)
	require.NoError(t, err)
	return r
}

func TestApplyCreatesDecoratedObjectsAndLabels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := &testPlugin{
		name: "mesh",
		objects: func(plugin.Target) []client.Object {
			return []client.Object{configMap("cfg", map[string]string{"a": "1"})}
		},
		labels: map[string]string{"istio.io/dataplane-mode": "ambient"},
	}
	res := newRunner(t, e, p).Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())

	assert.Len(t, res.Plugins[0].Created, 1)
	assert.Equal(t, []string{"istio.io/dataplane-mode"}, res.Plugins[0].LabelsSet)

	cm := &corev1.ConfigMap{}
	require.NoError(t, e.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cfg"}, cm))
	assert.Equal(t, "1", cm.Data["a"])
	assert.True(t, plugin.IsManagedBy(cm.Labels, "mesh"), "labels: %v", cm.Labels)
	require.Len(t, cm.OwnerReferences, 1)
	owner := cm.OwnerReferences[0]
	assert.Equal(t, "Profile", owner.Kind)
	assert.Equal(t, "kubeflow.org/v1", owner.APIVersion)
	assert.Equal(t, ns, owner.Name)
	assert.True(t, *owner.Controller)
	assert.NotEmpty(t, cm.Annotations[plugin.DesiredHashAnnotation])

	labels := e.namespace(t).Labels
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"])
	assert.Equal(t, "ml", labels["team"], "a label set by someone else must survive")
}

func TestApplyTwiceWritesNothingTheSecondTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := &testPlugin{
		name: "authz",
		objects: func(plugin.Target) []client.Object {
			return []client.Object{configMap("cfg", map[string]string{"a": "1"}), policy("owner", ns)}
		},
		labels: map[string]string{"k": "v"},
	}
	r := newRunner(t, e, p)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())
	first := e.writes
	assert.Equal(t, 3, first, "two objects and one label apply")

	res := r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Equal(t, first, e.writes, "the second apply must send no write")
	assert.False(t, res.Changed())
	assert.Len(t, res.Plugins[0].Unchanged, 2)
}

func TestApplyRepairsDrift(t *testing.T) {
	e := newEnv(t)
	p := &testPlugin{name: "authz", objects: func(plugin.Target) []client.Object { return []client.Object{policy("owner", ns)} }}
	r := newRunner(t, e, p)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())

	// Someone widens the policy by hand.
	ap := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, e.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "owner"}, ap))
	ap.Spec.Rules[0].From[0].Source.Namespaces = []string{ns, "intruder"}
	require.NoError(t, e.Update(context.Background(), ap, client.FieldOwner("kubectl-edit")))

	res := r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Len(t, res.Plugins[0].Updated, 1)
	require.NoError(t, e.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "owner"}, ap))
	assert.Equal(t, []string{ns}, ap.Spec.Rules[0].From[0].Source.Namespaces)
}

func TestApplyRemovesAFieldThePluginStopsSetting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	data := map[string]string{"a": "1", "b": "2"}
	p := &testPlugin{name: "mesh", objects: func(plugin.Target) []client.Object { return []client.Object{configMap("cfg", data)} }}
	r := newRunner(t, e, p)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())

	delete(data, "b")
	res := r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Len(t, res.Plugins[0].Updated, 1, "a removed field must be noticed although the rest is a subset")
	cm := &corev1.ConfigMap{}
	require.NoError(t, e.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cfg"}, cm))
	assert.Equal(t, map[string]string{"a": "1"}, cm.Data)
}

func TestApplyLeavesForeignObjectsAlone(t *testing.T) {
	t.Parallel()
	foreign := policy("owner", "somebody-else")
	foreign.Namespace = ns
	foreignCM := configMap("other-plugins", map[string]string{"x": "y"})
	foreignCM.Namespace = ns
	foreignCM.Labels = map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "pss"}
	e := newEnv(t, foreign, foreignCM)
	p := &testPlugin{name: "authz", objects: func(plugin.Target) []client.Object { return []client.Object{policy("owner", ns)} }}

	res := newRunner(t, e, p).Apply(context.Background(), testProfile())

	var conflict *runner.ConflictError
	require.ErrorAs(t, res.Err(), &conflict)
	assert.ErrorIs(t, res.Err(), runner.ErrConflict)
	assert.Equal(t, policyRef("owner"), conflict.Ref)
	ready, msg := res.Summary()
	assert.False(t, ready)
	assert.Contains(t, msg, "AuthorizationPolicy.security.istio.io/owner exists")

	got := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, e.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "owner"}, got))
	assert.Equal(t, []string{"somebody-else"}, got.Spec.Rules[0].From[0].Source.Namespaces, "foreign policy must be untouched")
	assert.Empty(t, got.Labels)
	// Another plugin's object is not pruned by this one.
	require.NoError(t, e.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "other-plugins"}, &corev1.ConfigMap{}))
	assert.Empty(t, res.Plugins[0].Deleted)
}

func TestLabelOwnership(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := &testPlugin{name: "pss", labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}
	r := newRunner(t, e, p)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())

	// Another writer (the controller's namespace-labels sync) adds its own label with its own manager.
	require.NoError(t, e.Apply(context.Background(), corev1ac.Namespace(ns).WithLabels(map[string]string{"pipelines.kubeflow.org/enabled": "true"}),
		client.FieldOwner("profiles-controller")))

	p.labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
	res := r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Equal(t, []string{"pod-security.kubernetes.io/enforce"}, res.Plugins[0].LabelsSet)

	labels := e.namespace(t).Labels
	assert.Equal(t, "restricted", labels["pod-security.kubernetes.io/enforce"])
	assert.Equal(t, "true", labels["pipelines.kubeflow.org/enabled"])
	assert.Equal(t, "ml", labels["team"])

	// Stop wanting the label: it goes, the others stay.
	p.labels = nil
	res = r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Equal(t, []string{"pod-security.kubernetes.io/enforce"}, res.Plugins[0].LabelsRemoved)
	labels = e.namespace(t).Labels
	assert.NotContains(t, labels, "pod-security.kubernetes.io/enforce")
	assert.Equal(t, "true", labels["pipelines.kubeflow.org/enabled"])
}

func TestLabelWaitsForTheObjectItRequires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	authz := &testPlugin{name: "authz", err: errors.New("config not loaded")}
	mesh := &testPlugin{
		name:     "mesh",
		labels:   map[string]string{"istio.io/dataplane-mode": "ambient", "other": "x"},
		requires: map[string][]plugin.Ref{"istio.io/dataplane-mode": {policyRef("ztunnel")}},
	}
	r := newRunner(t, e, authz, mesh)

	res := r.Apply(context.Background(), testProfile())
	require.Error(t, res.Err(), "authz failed")
	assert.NotContains(t, e.namespace(t).Labels, "istio.io/dataplane-mode", "must not enrol before the ztunnel policy exists")
	assert.Equal(t, "x", e.namespace(t).Labels["other"], "ungated labels still apply")
	assert.Equal(t, []string{"mesh: label istio.io/dataplane-mode withheld: AuthorizationPolicy.security.istio.io/ztunnel does not exist"}, res.Waiting())
	assert.Equal(t, runner.DefaultWaitRequeue, res.RequeueAfter())

	// Once the other plugin produces the policy, the same single Apply creates it and then labels.
	authz.err = nil
	authz.objects = func(plugin.Target) []client.Object { return []client.Object{policy("ztunnel", ns)} }
	res = r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting())
	assert.Equal(t, "ambient", e.namespace(t).Labels["istio.io/dataplane-mode"])
	ready, _ := res.Summary()
	assert.True(t, ready)
}

func TestFailedGenerationKeepsEverything(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := &testPlugin{name: "pss", objects: func(plugin.Target) []client.Object { return []client.Object{configMap("cfg", nil)} },
		labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}
	r := newRunner(t, e, p)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())
	before := e.writes

	p.err = errors.New("boom")
	res := r.Apply(context.Background(), testProfile())
	require.ErrorContains(t, res.Err(), "plugin pss: boom")
	assert.Equal(t, before, e.writes, "a failing plugin must not prune or unlabel")
	assert.Equal(t, "baseline", e.namespace(t).Labels["pod-security.kubernetes.io/enforce"])
}

func TestApplyNeedsTheNamespace(t *testing.T) {
	t.Parallel()
	c := fake.NewClientBuilder().WithScheme(runner.NewScheme()).Build()
	res := newRunner(t, c, &testPlugin{name: "mesh"}).Apply(context.Background(), testProfile())
	assert.ErrorIs(t, res.Err(), runner.ErrNamespaceNotFound)
}

func TestApplyRejectsBadPluginOutput(t *testing.T) {
	t.Parallel()
	other := configMap("x", nil)
	other.Namespace = "bob"
	cases := []struct {
		name string
		obj  client.Object
		want string
	}{
		{"other namespace", other, `metadata.namespace "bob" is not the target namespace "alice"`},
		{"no name", configMap("", nil), "metadata.name is empty"},
		{"kind not declared", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, "Secret is not among the plugin's Kinds()"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			p := &testPlugin{name: "mesh", objects: func(plugin.Target) []client.Object { return []client.Object{tc.obj} }}
			res := newRunner(t, e, p).Apply(context.Background(), testProfile())
			require.ErrorContains(t, res.Err(), tc.want)
			assert.Zero(t, e.writes)
		})
	}
}

func TestNewRunnerChecksNames(t *testing.T) {
	t.Parallel()
	_, err := runner.NewRunner(nil, &testPlugin{name: "Mesh_1"})
	assert.ErrorContains(t, err, `plugins[0].Name() "Mesh_1"`)
	_, err = runner.NewRunner(nil, &testPlugin{name: "a"}, &testPlugin{name: "a"})
	assert.ErrorContains(t, err, `plugins[1].Name() "a": used by another plugin`)
}

func TestPluginsCannotFightOverALabel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := &testPlugin{name: "a", labels: map[string]string{"shared": "one", "same": "x"}}
	b := &testPlugin{name: "b", labels: map[string]string{"shared": "two", "same": "x", "own": "y"}}
	res := newRunner(t, e, a, b).Apply(context.Background(), testProfile())

	require.ErrorContains(t, res.Err(), `plugin b: namespace label shared="two" clashes with plugin a's "one"`)
	labels := e.namespace(t).Labels
	assert.Equal(t, "one", labels["shared"])
	assert.Equal(t, "x", labels["same"], "agreeing plugins may share a label")
	assert.Equal(t, "y", labels["own"])

	r, err := runner.Render(runner.NewScheme(), []plugin.Plugin{a, b}, plugin.Target{Namespace: ns})
	require.NoError(t, err)
	require.Len(t, r.Errors, 1)
	assert.ErrorContains(t, r.Errors[0], "clashes")
	assert.Equal(t, "one", r.Namespace.GetLabels()["shared"])
}

func TestAdoptTakesOverOnlyWhatThePluginNames(t *testing.T) {
	t.Parallel()
	kfamMade := policy("user-bob-example-com-clusterrole-edit", "anyone")
	kfamMade.Namespace = ns
	kfamMade.Annotations = map[string]string{"user": "bob@example.com", "role": "edit"}
	otherPlugin := configMap("cfg", nil)
	otherPlugin.Namespace = ns
	otherPlugin.Labels = map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "waypoint"}
	e := newEnv(t, kfamMade, controlledByTestProfile(otherPlugin))

	ref := policyRef(kfamMade.Name)
	cmRef := plugin.Ref{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Name: "cfg"}
	p := &adoptingPlugin{testPlugin{name: "authz", objects: func(plugin.Target) []client.Object {
		return []client.Object{policy(kfamMade.Name, ns), configMap("cfg", map[string]string{"mine": "yes"})}
	}}, []plugin.Ref{ref, cmRef}}
	res := newRunner(t, e, p).Apply(context.Background(), testProfile())

	// The kfam policy is adopted; another plugin's ConfigMap never is.
	var conflict *runner.ConflictError
	require.ErrorAs(t, res.Err(), &conflict)
	assert.Equal(t, cmRef, conflict.Ref)
	assert.Equal(t, []plugin.Ref{ref}, res.Plugins[0].Updated)
	assert.Contains(t, res.Plugins[0].Warnings[0], "adopted AuthorizationPolicy.security.istio.io/user-bob-example-com-clusterrole-edit")

	got := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, e.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: kfamMade.Name}, got))
	assert.True(t, plugin.IsManagedBy(got.Labels, "authz"))
	assert.Equal(t, []string{ns}, got.Spec.Rules[0].From[0].Source.Namespaces)
	assert.Equal(t, "bob@example.com", got.Annotations["user"], "fields the plugin does not set stay")
}

type adoptingPlugin struct {
	testPlugin
	adopt []plugin.Ref
}

func (p *adoptingPlugin) Generate(t plugin.Target) (plugin.Desired, error) {
	d, err := p.testPlugin.Generate(t)
	d.Adopt = p.adopt
	return d, err
}

func TestRetryableTellsInputErrorsFromAPIErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := &testPlugin{name: "bad", err: errors.New("owner is invalid")}
	res := newRunner(t, e, bad).Apply(context.Background(), testProfile())
	require.ErrorIs(t, res.Err(), plugin.ErrInput)
	assert.False(t, res.Retryable(), "a plugin's refusal does not go away by retrying")

	failing := fake.NewClientBuilder().WithScheme(runner.NewScheme()).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			return apierrors.NewServiceUnavailable("etcd is down")
		},
	}).Build()
	good := &testPlugin{name: "good", labels: map[string]string{"a": "b"}}
	res = newRunner(t, failing, good).Apply(context.Background(), testProfile())
	require.Error(t, res.Err())
	assert.True(t, res.Retryable())
}

// Switching a namespace away from a waypoint must take the routing label off before the policy
// that protected the waypoint is rewritten; the other way round, a request could reach the
// waypoint while no policy is attached to it.
func TestEnrolmentLabelsAreWithdrawnBeforeObjectsChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var order []string
	c := interceptor.NewClient(e.Client.(client.WithWatch), interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			switch ac := obj.(type) {
			case *corev1ac.NamespaceApplyConfiguration:
				keys := []string{}
				for k := range ac.Labels {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				order = append(order, "labels "+strings.Join(keys, ","))
			default:
				order = append(order, "object")
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	ambient := func(plugin.Target) []client.Object { return []client.Object{policy("owner", "via-waypoint")} }
	p := &testPlugin{name: "mesh", objects: ambient, labels: map[string]string{"use-waypoint": "waypoint", "team": "x"}}
	enrolling := &enrolmentPlugin{p, []string{"use-waypoint"}}
	r := newRunner(t, c, enrolling)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())

	order = nil
	p.objects = func(plugin.Target) []client.Object { return []client.Object{policy("owner", "sidecar")} }
	p.labels = map[string]string{"team": "x"}
	res := r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Equal(t, []string{"labels team", "object"}, order, "withdraw use-waypoint, then rewrite the policy")
	assert.NotContains(t, e.namespace(t).Labels, "use-waypoint")
	assert.Equal(t, "x", e.namespace(t).Labels["team"])

	// A label that is only being added waits for the objects instead.
	order = nil
	p.objects = ambient
	p.labels = map[string]string{"use-waypoint": "waypoint", "team": "x"}
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())
	assert.Equal(t, []string{"object", "labels team,use-waypoint"}, order)
}

type enrolmentPlugin struct {
	*testPlugin
	enrolment []string
}

func (p *enrolmentPlugin) Generate(t plugin.Target) (plugin.Desired, error) {
	d, err := p.testPlugin.Generate(t)
	d.Enrolment = p.enrolment
	return d, err
}

// A routing label whose value changes is withdrawn before the objects change too, and set again
// with its new value after them.
func TestEnrolmentLabelWhoseValueChangesIsWithdrawnFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var order []string
	c := interceptor.NewClient(e.Client.(client.WithWatch), interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if ac, ok := obj.(*corev1ac.NamespaceApplyConfiguration); ok {
				order = append(order, "labels use-waypoint="+ac.Labels["use-waypoint"])
			} else {
				order = append(order, "object")
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	p := &testPlugin{name: "mesh", objects: func(plugin.Target) []client.Object { return []client.Object{policy("owner", "a")} },
		labels: map[string]string{"use-waypoint": "a"}}
	r := newRunner(t, c, &enrolmentPlugin{p, []string{"use-waypoint"}})
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())

	order = nil
	p.objects = func(plugin.Target) []client.Object { return []client.Object{policy("owner", "b")} }
	p.labels = map[string]string{"use-waypoint": "b"}
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())
	assert.Equal(t, []string{"labels use-waypoint=", "object", "labels use-waypoint=b"}, order)
}
