package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// labelEnv counts the namespace writes (by field manager) and can make them fail.
type labelEnv struct {
	*env
	c        client.Client
	managers []string // field manager of each namespace write, in order
	fail     error    // returned by every namespace write while set
}

func newLabelEnv(t *testing.T) *labelEnv {
	e := &labelEnv{env: newEnv(t)}
	e.c = interceptor.NewClient(e.Client.(client.WithWatch), interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if _, ok := obj.(*corev1ac.NamespaceApplyConfiguration); ok {
				e.managers = append(e.managers, (&client.ApplyOptions{}).ApplyOptions(opts).FieldManager)
				if e.fail != nil {
					return e.fail
				}
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	return e
}

// seenManagers records, on every Generate, the LabelManagers the plugin was given.
type seenManagers struct {
	*testPlugin
	seen map[string][]string
}

func (p *seenManagers) Generate(t plugin.Target) (plugin.Desired, error) {
	p.seen = t.Observed.LabelManagers
	return p.testPlugin.Generate(t)
}

func owners(t *testing.T, n *corev1.Namespace) map[string][]string {
	t.Helper()
	var out map[string][]string
	require.NoError(t, json.Unmarshal([]byte(n.Annotations[plugin.LabelOwnersAnnotation]), &out))
	return out
}

// Two plugins that want the same label with the same value both own it: either one can stop
// wanting it and the other's wish keeps it.
func TestALabelTwoPluginsWantAlikeIsOwnedByBoth(t *testing.T) {
	t.Parallel()
	e := newLabelEnv(t)
	first := &testPlugin{name: "first", labels: map[string]string{"mode": "ambient"}}
	second := &testPlugin{name: "second", labels: map[string]string{"mode": "ambient", "enforce": "baseline"}}
	r := newRunner(t, e.c, first, second)

	res := r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	n := e.namespace(t)
	assert.Equal(t, "ambient", n.Labels["mode"])
	assert.Equal(t, map[string][]string{"first": {"mode"}, "second": {"enforce", "mode"}}, owners(t, n))
}

// A failed label write is the failure of the plugins whose labels it changes, a removal too, and of
// no other: here the plugin that stopped wanting its label.
func TestAFailedLabelWriteIsThePluginsThatOnlyRemovesALabel(t *testing.T) {
	t.Parallel()
	e := newLabelEnv(t)
	leaving := &testPlugin{name: "leaving", labels: map[string]string{"mode": "ambient"}}
	staying := &testPlugin{name: "staying", labels: map[string]string{"enforce": "baseline"}}
	r := newRunner(t, e.c, leaving, staying)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())

	leaving.labels = map[string]string{}
	e.fail = errors.New("the API server is away")
	res := r.Apply(context.Background(), testProfile())
	require.Error(t, res.Err())
	require.Len(t, res.Plugins[0].Errors, 1, "the removal failed: %v", res.Plugins)
	assert.ErrorContains(t, res.Plugins[0].Errors[0], "plugin leaving: applying labels of namespace")
	assert.Empty(t, res.Plugins[1].Errors, "nothing of the other plugin's changed")
}

// The label write names the namespace it read: a namespace deleted since is not made again by the
// apply (server-side apply creates what it does not find), and the write fails.
func TestTheLabelWriteDoesNotRecreateANamespaceDeletedSinceItWasRead(t *testing.T) {
	t.Parallel()
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, UID: "read-before",
		Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}
	base := fake.NewClientBuilder().WithScheme(runner.NewScheme()).WithObjects(namespace).Build()
	deleted := false
	c := interceptor.NewClient(base, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if _, ok := obj.(*corev1ac.NamespaceApplyConfiguration); ok && !deleted {
				deleted = true
				require.NoError(t, c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	r := newRunner(t, c, &testPlugin{name: "pss", labels: map[string]string{"enforce": "baseline"}})

	res := r.Apply(context.Background(), testProfile())
	require.True(t, deleted, "the label write was attempted")
	require.Error(t, res.Err())
	err := base.Get(context.Background(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
	assert.True(t, apierrors.IsNotFound(err), "the namespace stays deleted: %v", err)
}

// Every plugin's labels go out in one write, under one field manager, and each plugin still sees
// its own labels as its own.
func TestOneLabelWriteForEveryPlugin(t *testing.T) {
	t.Parallel()
	e := newLabelEnv(t)
	pss := &seenManagers{testPlugin: &testPlugin{name: "pss", labels: map[string]string{"enforce": "baseline"}}}
	mesh := &testPlugin{name: "mesh", labels: map[string]string{"mode": "ambient", "injection": "disabled"},
		objects: func(plugin.Target) []client.Object { return []client.Object{policy("ztunnel", ns)} }}
	r := newRunner(t, e.c, mesh, pss)

	res := r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Equal(t, []string{plugin.LabelFieldManager}, e.managers, "one namespace write")
	n := e.namespace(t)
	assert.Equal(t, map[string]string{"team": "ml", "enforce": "baseline", "mode": "ambient", "injection": "disabled"}, n.Labels)
	assert.Equal(t, `{"mesh":["injection","mode"],"pss":["enforce"]}`, n.Annotations[plugin.LabelOwnersAnnotation])
	assert.Equal(t, []string{"injection", "mode"}, res.Plugins[0].LabelsSet)
	assert.Equal(t, []string{"enforce"}, res.Plugins[1].LabelsSet)

	// Steady state: nothing written; pss sees its label as its own.
	e.managers = nil
	res = r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.False(t, res.Changed())
	assert.Empty(t, e.managers)
	assert.Equal(t, []string{"profile-plugins/pss"}, pss.seen["enforce"])
	assert.Equal(t, []string{"profile-plugins/mesh"}, pss.seen["mode"])

	// One plugin's change is one write, reported for that plugin only; a label it drops goes.
	pss.labels = map[string]string{"enforce": "restricted"}
	mesh.labels = map[string]string{"mode": "ambient"}
	res = r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Equal(t, []string{plugin.LabelFieldManager}, e.managers)
	assert.Empty(t, res.Plugins[0].LabelsSet)
	assert.Equal(t, []string{"injection"}, res.Plugins[0].LabelsRemoved)
	assert.Equal(t, []string{"enforce"}, res.Plugins[1].LabelsSet)
	n = e.namespace(t)
	assert.Equal(t, map[string]string{"team": "ml", "enforce": "restricted", "mode": "ambient"}, n.Labels)
	assert.Equal(t, map[string][]string{"mesh": {"mode"}, "pss": {"enforce"}}, owners(t, n))

	// Revoke takes every label off in one write, and the annotation with them.
	e.managers = nil
	res = r.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Equal(t, []string{plugin.LabelFieldManager}, e.managers)
	n = e.namespace(t)
	assert.Equal(t, map[string]string{"team": "ml"}, n.Labels)
	assert.NotContains(t, n.Annotations, plugin.LabelOwnersAnnotation)
	assert.Equal(t, map[string]string{ownership.OwnerAnnotation: "alice@example.com"}, n.Annotations)
}

// A label one plugin must withhold is not written, while another plugin's labels are, in the
// same write.
func TestWithheldLabelOfOnePluginInTheSharedWrite(t *testing.T) {
	t.Parallel()
	e := newLabelEnv(t)
	pss := &testPlugin{name: "pss", labels: map[string]string{"enforce": "baseline"}}
	mesh := &testPlugin{name: "mesh", labels: map[string]string{"mode": "ambient"},
		requires: map[string][]plugin.Ref{"mode": {policyRef("ztunnel")}}}
	r := newRunner(t, e.c, mesh, pss)

	res := r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Equal(t, []string{plugin.LabelFieldManager}, e.managers)
	n := e.namespace(t)
	assert.NotContains(t, n.Labels, "mode", "no enrolment without the ztunnel policy")
	assert.Equal(t, "baseline", n.Labels["enforce"])
	assert.Equal(t, map[string][]string{"pss": {"enforce"}}, owners(t, n))
	assert.Equal(t, []string{"mesh: label mode withheld: AuthorizationPolicy.security.istio.io/ztunnel does not exist"}, res.Waiting())
}

// The write is all or nothing: when it fails, the namespace keeps every label it had, the
// errors name the plugins whose labels it was to change, and no enrolment gets ahead of its
// protection.
func TestFailedLabelWriteKeepsEveryLabel(t *testing.T) {
	t.Parallel()
	e := newLabelEnv(t)
	pss := &testPlugin{name: "pss", labels: map[string]string{"enforce": "baseline"}}
	authz := &testPlugin{name: "authz", labels: map[string]string{"audit": "on"}}
	mesh := &testPlugin{name: "mesh", objects: func(plugin.Target) []client.Object { return []client.Object{policy("ztunnel", ns)} }}
	r := newRunner(t, e.c, mesh, authz, pss)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())
	before := e.namespace(t)

	e.fail = errors.New("etcdserver: request timed out")
	pss.labels = map[string]string{"enforce": "restricted"}
	mesh.labels = map[string]string{"mode": "ambient"}
	mesh.requires = map[string][]plugin.Ref{"mode": {policyRef("ztunnel")}}
	res := r.Apply(context.Background(), testProfile())
	require.Error(t, res.Err())
	assert.True(t, res.Retryable())
	assert.ErrorContains(t, errors.Join(res.Plugins[0].Errors...), "plugin mesh: applying labels of namespace alice: etcdserver: request timed out")
	assert.ErrorContains(t, errors.Join(res.Plugins[2].Errors...), "plugin pss: applying labels of namespace alice")
	assert.Empty(t, res.Plugins[1].Errors, "authz's labels were not to change")
	after := e.namespace(t)
	assert.Equal(t, before.Labels, after.Labels)
	assert.Equal(t, before.Annotations, after.Annotations)
	assert.Empty(t, res.Plugins[2].LabelsSet, "nothing is reported as set")

	e.fail = nil
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())
	assert.Equal(t, map[string]string{"team": "ml", "enforce": "restricted", "audit": "on", "mode": "ambient"}, e.namespace(t).Labels)
}

// A plugin whose generation fails keeps its labels exactly while another plugin's change is
// written; a plugin the runner no longer runs keeps them too, through Apply and Revoke.
func TestLabelsOfAFailedOrRemovedPluginStay(t *testing.T) {
	t.Parallel()
	e := newLabelEnv(t)
	pss := &testPlugin{name: "pss", labels: map[string]string{"enforce": "baseline"}}
	mesh := &testPlugin{name: "mesh", labels: map[string]string{"mode": "ambient"}}
	require.NoError(t, newRunner(t, e.c, mesh, pss).Apply(context.Background(), testProfile()).Err())

	pss.err = errors.New("config not loaded")
	mesh.labels = map[string]string{"mode": "ambient", "injection": "disabled"}
	res := newRunner(t, e.c, mesh, pss).Apply(context.Background(), testProfile())
	require.ErrorContains(t, res.Err(), "config not loaded")
	n := e.namespace(t)
	assert.Equal(t, map[string]string{"team": "ml", "enforce": "baseline", "mode": "ambient", "injection": "disabled"}, n.Labels)
	assert.Equal(t, map[string][]string{"mesh": {"injection", "mode"}, "pss": {"enforce"}}, owners(t, n))

	// The runner no longer runs pss: its label stays, still attributed to it.
	mesh.labels = map[string]string{"mode": "ambient"}
	r := newRunner(t, e.c, mesh)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())
	require.NoError(t, r.Revoke(context.Background(), testProfile()).Err())
	n = e.namespace(t)
	assert.Equal(t, map[string]string{"team": "ml", "enforce": "baseline"}, n.Labels)
	assert.Equal(t, map[string][]string{"pss": {"enforce"}}, owners(t, n))
}

// A namespace labelled by a release before the shared write has each plugin's labels under the
// plugin's own field manager. The first Apply takes them over (the shared apply co-owns what
// stays, then each old manager lets go), removes what the old manager owned and no plugin wants,
// and leaves other writers' labels; from then on nothing is written.
func TestFirstApplyTakesOverPerPluginLabels(t *testing.T) {
	t.Parallel()
	e := newLabelEnv(t)
	legacy := func(name string, labels map[string]string) {
		require.NoError(t, e.Apply(context.Background(), corev1ac.Namespace(ns).WithLabels(labels),
			client.FieldOwner(plugin.FieldManager(name)), client.ForceOwnership))
	}
	legacy("pss", map[string]string{"enforce": "baseline", "enforce-version": "latest"})
	legacy("mesh", map[string]string{"mode": "ambient", "stale": "x", "shared-with-kubectl": "y"})
	require.NoError(t, e.Apply(context.Background(), corev1ac.Namespace(ns).WithLabels(map[string]string{"shared-with-kubectl": "y"}),
		client.FieldOwner("kubectl")))

	pss := &seenManagers{testPlugin: &testPlugin{name: "pss", labels: map[string]string{"enforce": "baseline", "enforce-version": "latest"}}}
	mesh := &testPlugin{name: "mesh", labels: map[string]string{"mode": "ambient"}}
	r := newRunner(t, e.c, mesh, pss)
	res := r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Equal(t, []string{"profile-plugins/pss"}, pss.seen["enforce"], "the old manager counts as the plugin's own")
	assert.Equal(t, []string{plugin.LabelFieldManager, "profile-plugins/mesh", "profile-plugins/pss"}, e.managers,
		"one shared apply, then one release per old manager")
	n := e.namespace(t)
	assert.Equal(t, map[string]string{"team": "ml", "enforce": "baseline", "enforce-version": "latest", "mode": "ambient", "shared-with-kubectl": "y"}, n.Labels,
		"stale goes: only the old manager owned it")
	assert.Equal(t, []string{"shared-with-kubectl", "stale"}, res.Plugins[0].LabelsRemoved)
	assert.Empty(t, res.Plugins[1].LabelsSet)
	assert.Contains(t, res.Warnings(), "pss: namespace labels enforce, enforce-version moved from field manager profile-plugins/pss to profile-plugins (once, on upgrade)")
	keys := fixture.LabelKeysByManager(t, n)
	assert.NotContains(t, keys, "profile-plugins/pss")
	assert.NotContains(t, keys, "profile-plugins/mesh")
	assert.ElementsMatch(t, []string{"enforce", "enforce-version", "mode"}, keys[plugin.LabelFieldManager])
	assert.Equal(t, map[string][]string{"mesh": {"mode"}, "pss": {"enforce", "enforce-version"}}, owners(t, n))

	e.managers = nil
	res = r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Empty(t, e.managers, "the upgrade costs writes once")
	assert.Equal(t, []string{"profile-plugins/pss"}, pss.seen["enforce"])
}

// The annotation only attributes: it never makes a label the runner's. Another writer that
// changes it takes it over, and the runner no longer believes it; the next write restores it.
func TestLabelOwnersAnnotationGrantsNothing(t *testing.T) {
	t.Parallel()
	e := newLabelEnv(t)
	pss := &seenManagers{testPlugin: &testPlugin{name: "pss", labels: map[string]string{"enforce": "baseline"}}}
	r := newRunner(t, e.c, pss)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())

	// Someone writes under the runner's own field manager an annotation that claims team.
	require.NoError(t, e.Apply(context.Background(), corev1ac.Namespace(ns).
		WithLabels(map[string]string{"enforce": "baseline"}).
		WithAnnotations(map[string]string{plugin.LabelOwnersAnnotation: `{"pss":["enforce","team"]}`}),
		client.FieldOwner(plugin.LabelFieldManager), client.ForceOwnership))
	pss.labels = map[string]string{"enforce": "restricted"}
	res := r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	n := e.namespace(t)
	assert.Equal(t, "ml", n.Labels["team"], "team is not the runner's: the shared manager never owned it")
	assert.Equal(t, `{"pss":["enforce"]}`, n.Annotations[plugin.LabelOwnersAnnotation])

	// kubectl annotate --overwrite: the runner sees its label under its shared manager, not as
	// pss's own (pss then keeps the level, never loosening it), and writes the annotation back.
	n.Annotations[plugin.LabelOwnersAnnotation] = `{"mesh":["enforce"]}`
	require.NoError(t, e.Update(context.Background(), n, client.FieldOwner("kubectl-annotate")))
	e.managers = nil
	res = r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Equal(t, []string{plugin.LabelFieldManager}, pss.seen["enforce"])
	assert.Equal(t, []string{plugin.LabelFieldManager}, e.managers)
	n = e.namespace(t)
	assert.Equal(t, "restricted", n.Labels["enforce"])
	assert.Equal(t, `{"pss":["enforce"]}`, n.Annotations[plugin.LabelOwnersAnnotation])
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())
	assert.Equal(t, []string{"profile-plugins/pss"}, pss.seen["enforce"])
}

// The once-on-upgrade release of a plugin's old field manager names the namespace it read too: a
// namespace deleted between the shared write and the release is not made again by the release's
// apply, and the release fails.
func TestTheLegacyLabelReleaseDoesNotRecreateANamespaceDeletedSinceItWasRead(t *testing.T) {
	t.Parallel()
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, UID: "read-before",
		Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}
	base := fake.NewClientBuilder().WithScheme(runner.NewScheme()).WithReturnManagedFields().WithObjects(namespace).Build()
	require.NoError(t, base.Apply(context.Background(), corev1ac.Namespace(ns).WithLabels(map[string]string{"enforce": "baseline"}),
		client.FieldOwner(plugin.FieldManager("pss")), client.ForceOwnership))
	deleted := false
	c := interceptor.NewClient(base, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			manager := (&client.ApplyOptions{}).ApplyOptions(opts).FieldManager
			if _, ok := obj.(*corev1ac.NamespaceApplyConfiguration); ok && manager == plugin.FieldManager("pss") && !deleted {
				deleted = true
				require.NoError(t, c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	r := newRunner(t, c, &testPlugin{name: "pss", labels: map[string]string{"enforce": "baseline"}})

	res := r.Apply(context.Background(), testProfile())
	require.True(t, deleted, "the release was attempted")
	require.Error(t, res.Err())
	assert.ErrorContains(t, res.Err(), "releasing the labels of namespace "+ns)
	err := base.Get(context.Background(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
	assert.True(t, apierrors.IsNotFound(err), "the namespace stays deleted: %v", err)
}
