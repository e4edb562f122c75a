package dryrun_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner/dryrun"
)

func configMap(name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, Labels: labels}}
}

func newFake(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	return fakeWithScheme(s, objs...)
}

// fakeWithScheme is controller-runtime's fake client, except that an apply with dryRun=All
// persists nothing: the fake's Apply (v0.24.1) passes the options on as Raw patch options, whose
// DryRun its patch never reads, so it would persist the object. The answer is the request, as
// the fake answers every other dry-run write.
func fakeWithScheme(s *runtime.Scheme, objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if slices.Contains((&client.ApplyOptions{}).ApplyOptions(opts).DryRun, metav1.DryRunAll) {
				return nil
			}
			return c.Apply(ctx, obj, opts...)
		},
	}).Build()
}

func names(t *testing.T, c client.Reader) []string {
	t.Helper()
	list := &corev1.ConfigMapList{}
	require.NoError(t, c.List(context.Background(), list, client.InNamespace("team")))
	var out []string
	for _, cm := range list.Items {
		out = append(out, cm.Name)
	}
	return out
}

// An object created in the run is got and listed through the Client, and never persisted.
func TestClientOverlaysACreatedObject(t *testing.T) {
	ctx := context.Background()
	c := newFake(t, configMap("kept", nil))
	d := dryrun.NewClient(c, nil)

	require.NoError(t, d.Create(ctx, configMap("made", map[string]string{plugin.PluginLabel: "authz"})))

	got := &corev1.ConfigMap{}
	require.NoError(t, d.Get(ctx, client.ObjectKey{Namespace: "team", Name: "made"}, got))
	assert.Equal(t, "authz", got.Labels[plugin.PluginLabel])
	assert.ElementsMatch(t, []string{"kept", "made"}, names(t, d))
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "made"}, &corev1.ConfigMap{})),
		"a dry-run create persisted the object")
	assert.Equal(t, []string{"kept"}, names(t, c))

	writes := d.Writes()
	require.Len(t, writes, 1)
	w := writes[0]
	assert.Equal(t, "create", w.Verb)
	assert.Equal(t, "authz", w.Plugin, "the plugin comes from the object's label when no field manager names it")
	assert.Equal(t, "ConfigMap", w.GVK.Kind)
	assert.Equal(t, "team", w.Namespace)
	assert.Equal(t, "made", w.Name)
	assert.Equal(t, plugin.Ref{GroupKind: w.GVK.GroupKind(), Name: "made"}, w.Ref())
	assert.Nil(t, w.Before, "the object did not exist before")
	require.NotNil(t, w.After)
	assert.Equal(t, "made", w.After.GetName())
}

// A deleted object is gone from the run's Get and List, and still on the cluster.
func TestClientOverlaysADeletedObject(t *testing.T) {
	ctx := context.Background()
	c := newFake(t, configMap("gone", nil), configMap("kept", nil))
	d := dryrun.NewClient(c, nil)

	require.NoError(t, d.Delete(ctx, configMap("gone", nil)))

	err := d.Get(ctx, client.ObjectKey{Namespace: "team", Name: "gone"}, &corev1.ConfigMap{})
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
	assert.Equal(t, []string{"kept"}, names(t, d))
	assert.ElementsMatch(t, []string{"gone", "kept"}, names(t, c), "a dry-run delete removed the object")

	writes := d.Writes()
	require.Len(t, writes, 1)
	assert.Equal(t, "delete", writes[0].Verb)
	require.NotNil(t, writes[0].Before)
	assert.Equal(t, "gone", writes[0].Before.GetName())
	assert.Nil(t, writes[0].After)
}

// An update is seen by the run's reads with its content, names the plugin of its field manager,
// and leaves the cluster's object and resourceVersion as they were.
func TestClientOverlaysAnUpdate(t *testing.T) {
	ctx := context.Background()
	c := newFake(t, configMap("cm", map[string]string{"a": "1"}))
	d := dryrun.NewClient(c, nil)

	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "cm"}, cm))
	version := cm.ResourceVersion
	cm.Labels = map[string]string{"a": "2"}
	require.NoError(t, d.Update(ctx, cm, client.FieldOwner(plugin.FieldManager("pss"))))

	got := &corev1.ConfigMap{}
	require.NoError(t, d.Get(ctx, client.ObjectKey{Namespace: "team", Name: "cm"}, got))
	assert.Equal(t, "2", got.Labels["a"])
	persisted := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "cm"}, persisted))
	assert.Equal(t, "1", persisted.Labels["a"])
	assert.Equal(t, version, persisted.ResourceVersion)

	writes := d.Writes()
	require.Len(t, writes, 1)
	assert.Equal(t, "update", writes[0].Verb)
	assert.Equal(t, "pss", writes[0].Plugin)
	assert.Equal(t, map[string]string{"a": "1"}, writes[0].Before.GetLabels())
	assert.Equal(t, map[string]string{"a": "2"}, writes[0].After.GetLabels())
}

// A list with a label selector keeps only the run's objects the selector matches.
func TestClientListAppliesTheSelectorToTheRunsObjects(t *testing.T) {
	ctx := context.Background()
	c := newFake(t)
	d := dryrun.NewClient(c, nil)
	require.NoError(t, d.Create(ctx, configMap("match", map[string]string{"x": "y"})))
	require.NoError(t, d.Create(ctx, configMap("other", map[string]string{"x": "z"})))

	list := &corev1.ConfigMapList{}
	require.NoError(t, d.List(ctx, list, client.InNamespace("team"), client.MatchingLabels{"x": "y"}))
	require.Len(t, list.Items, 1)
	assert.Equal(t, "match", list.Items[0].Name)
	list = &corev1.ConfigMapList{}
	require.NoError(t, d.List(ctx, list, client.InNamespace("elsewhere")))
	assert.Empty(t, list.Items, "the run's objects are listed only in their namespace")
}

// reader stands for the runner's cache: reads go through it, not through the writing client.
type reader struct {
	client.Reader
	gets int
}

func (r *reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}

func TestNewClientReadsThroughTheReaderOrTheClient(t *testing.T) {
	ctx := context.Background()
	c := newFake(t, configMap("cm", map[string]string{"a": "1"}))
	key := client.ObjectKey{Namespace: "team", Name: "cm"}

	got := &corev1.ConfigMap{}
	require.NoError(t, dryrun.NewClient(c, nil).Get(ctx, key, got), "a nil reader reads through c")
	assert.Equal(t, "1", got.Labels["a"])

	r := &reader{Reader: c}
	require.NoError(t, dryrun.NewClient(c, r).Get(ctx, key, &corev1.ConfigMap{}))
	assert.Equal(t, 1, r.gets)
}

// Writes returns a copy: changing it changes nothing the Client keeps.
func TestWritesReturnsACopy(t *testing.T) {
	ctx := context.Background()
	d := dryrun.NewClient(newFake(t), nil)
	require.NoError(t, d.Create(ctx, configMap("cm", nil)))

	first := d.Writes()
	first[0].Verb = "changed"
	assert.Equal(t, "create", d.Writes()[0].Verb)
}

// An apply is recorded with the plugin of its field manager and seen by the run's reads; the
// cluster's object stays as it was.
func TestClientOverlaysAnApply(t *testing.T) {
	ctx := context.Background()
	c := newFake(t, configMap("cm", map[string]string{"a": "1"}))
	d := dryrun.NewClient(c, nil)

	ac := corev1ac.ConfigMap("cm", "team").WithLabels(map[string]string{"a": "2"})
	require.NoError(t, d.Apply(ctx, ac, client.FieldOwner(plugin.FieldManager("waypoint"))))
	require.NoError(t, d.Apply(ctx, corev1ac.ConfigMap("new", "team"), client.FieldOwner("kubectl")))

	got := &corev1.ConfigMap{}
	require.NoError(t, d.Get(ctx, client.ObjectKey{Namespace: "team", Name: "cm"}, got))
	assert.Equal(t, "2", got.Labels["a"])
	assert.ElementsMatch(t, []string{"cm", "new"}, names(t, d))
	persisted := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "cm"}, persisted))
	assert.Equal(t, "1", persisted.Labels["a"])
	assert.Equal(t, []string{"cm"}, names(t, c))

	writes := d.Writes()
	require.Len(t, writes, 2)
	assert.Equal(t, "apply", writes[0].Verb)
	assert.Equal(t, "waypoint", writes[0].Plugin)
	require.NotNil(t, writes[0].Before)
	assert.Equal(t, map[string]string{"a": "1"}, writes[0].Before.GetLabels())
	assert.Equal(t, map[string]string{"a": "2"}, writes[0].After.GetLabels())
	assert.Empty(t, writes[1].Plugin, "kubectl is none of the runner's field managers")
	assert.Nil(t, writes[1].Before)
}

// A patch is recorded as such and seen by the run's reads.
func TestClientOverlaysAPatch(t *testing.T) {
	ctx := context.Background()
	c := newFake(t, configMap("cm", map[string]string{"a": "1"}))
	d := dryrun.NewClient(c, nil)

	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "cm"}, cm))
	patch := client.MergeFrom(cm.DeepCopy())
	cm.Labels["a"] = "2"
	require.NoError(t, d.Patch(ctx, cm, patch, client.FieldOwner(plugin.FieldManager("authz"))))

	got := &corev1.ConfigMap{}
	require.NoError(t, d.Get(ctx, client.ObjectKey{Namespace: "team", Name: "cm"}, got))
	assert.Equal(t, "2", got.Labels["a"])
	writes := d.Writes()
	require.Len(t, writes, 1)
	assert.Equal(t, "patch", writes[0].Verb)
	assert.Equal(t, "authz", writes[0].Plugin)
}

// An apply after the run's own update of the object is seen on top of that update: the server
// answers it against the persisted object, which lacks the update.
func TestClientAppliesOntoTheRunsUpdate(t *testing.T) {
	ctx := context.Background()
	c := newFake(t, configMap("cm", map[string]string{"a": "1", "stale": "x"}))
	d := dryrun.NewClient(c, nil)

	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "cm"}, cm))
	cm.Labels = map[string]string{"a": "2"}
	require.NoError(t, d.Update(ctx, cm))
	// The fake answers the apply with its body alone, as if the object held nothing else.
	require.NoError(t, d.Apply(ctx, corev1ac.ConfigMap("cm", "team").WithLabels(map[string]string{"b": "3"})))

	got := &corev1.ConfigMap{}
	require.NoError(t, d.Get(ctx, client.ObjectKey{Namespace: "team", Name: "cm"}, got))
	assert.Equal(t, map[string]string{"a": "2", "b": "3"}, got.Labels, "the update's labels stay and the stale one stays removed")
}

// A write that takes the last finalizer off an object being deleted deletes it: the run sees it
// gone. One that leaves a finalizer leaves the object, still being deleted.
func TestClientReadsALastFinalizerReleasedAsTheObjectGone(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "team", Name: "cm"}
	finalized := func() *corev1.ConfigMap {
		cm := configMap("cm", nil)
		cm.Finalizers = []string{"example.com/a", "example.com/b"}
		return cm
	}

	for name, deleting := range map[string]func(*testing.T, *dryrun.Client){
		"deleted by the run": func(t *testing.T, d *dryrun.Client) { require.NoError(t, d.Delete(ctx, configMap("cm", nil))) },
		"deleted before":     func(*testing.T, *dryrun.Client) {},
	} {
		t.Run(name, func(t *testing.T) {
			for _, left := range [][]string{{"example.com/b"}, nil} {
				cm := finalized()
				if name == "deleted before" {
					cm.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				}
				c := newFake(t, cm)
				d := dryrun.NewClient(c, nil)
				deleting(t, d)

				cur := &corev1.ConfigMap{}
				require.NoError(t, c.Get(ctx, key, cur))
				cur.Finalizers = left
				require.NoError(t, d.Update(ctx, cur))
				got := &corev1.ConfigMap{}
				err := d.Get(ctx, key, got)
				writes := d.Writes()
				if left == nil {
					assert.True(t, apierrors.IsNotFound(err), "the last finalizer went: got %v", err)
					assert.Nil(t, writes[len(writes)-1].After)
					continue
				}
				require.NoError(t, err, "a finalizer is left")
				assert.Equal(t, left, got.Finalizers)
				assert.NotNil(t, writes[len(writes)-1].After)
			}
		})
	}

	// An object nobody deletes keeps being seen when its finalizers go.
	c := newFake(t, finalized())
	d := dryrun.NewClient(c, nil)
	cur := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, key, cur))
	cur.Finalizers = nil
	require.NoError(t, d.Update(ctx, cur))
	require.NoError(t, d.Get(ctx, key, &corev1.ConfigMap{}))
}

// A listed object the run changed is listed with the run's content, and only while the selector
// still matches it.
func TestClientListShowsTheRunsChangesToListedObjects(t *testing.T) {
	ctx := context.Background()
	c := newFake(t, configMap("kept", map[string]string{"x": "y"}), configMap("moved", map[string]string{"x": "y"}))
	d := dryrun.NewClient(c, nil)

	for name, value := range map[string]string{"kept": "y", "moved": "z"} {
		cm := &corev1.ConfigMap{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "team", Name: name}, cm))
		cm.Labels["x"] = value
		cm.Data = map[string]string{"by": "run"}
		require.NoError(t, d.Update(ctx, cm))
	}

	list := &corev1.ConfigMapList{}
	require.NoError(t, d.List(ctx, list, client.InNamespace("team"), client.MatchingLabels{"x": "y"}))
	require.Len(t, list.Items, 1)
	assert.Equal(t, "kept", list.Items[0].Name)
	assert.Equal(t, map[string]string{"by": "run"}, list.Items[0].Data)
	assert.ElementsMatch(t, []string{"kept", "moved"}, names(t, d))
}

// An unstructured list gets the run's new objects as unstructured items.
func TestClientListsTheRunsObjectsInAnUnstructuredList(t *testing.T) {
	ctx := context.Background()
	d := dryrun.NewClient(newFake(t, configMap("kept", nil)), nil)
	require.NoError(t, d.Create(ctx, configMap("made", nil)))

	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	require.NoError(t, d.List(ctx, list, client.InNamespace("team")))
	var got []string
	for _, it := range list.Items {
		assert.Equal(t, "ConfigMap", it.GetKind())
		got = append(got, it.GetName())
	}
	assert.ElementsMatch(t, []string{"kept", "made"}, got)
}

// A list of a kind the run never wrote is the reader's.
func TestClientListOfAnUntouchedKindIsTheReaders(t *testing.T) {
	ctx := context.Background()
	d := dryrun.NewClient(newFake(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "s"}}), nil)
	require.NoError(t, d.Create(ctx, configMap("made", nil)))

	list := &corev1.SecretList{}
	require.NoError(t, d.List(ctx, list, client.InNamespace("team")))
	require.Len(t, list.Items, 1)
	assert.Equal(t, "s", list.Items[0].Name)
}

// An apply after the run's own create of the object is seen on top of the create: the server
// answers it as if the object did not exist. Applies after applies compose instead (see
// TestClientOverlaysAnApply): an apply is no whole write.
func TestClientAppliesOntoTheRunsCreate(t *testing.T) {
	ctx := context.Background()
	d := dryrun.NewClient(newFake(t), nil)

	require.NoError(t, d.Create(ctx, configMap("cm", map[string]string{"a": "1"})))
	require.NoError(t, d.Apply(ctx, corev1ac.ConfigMap("cm", "team").WithLabels(map[string]string{"b": "2"})))

	got := &corev1.ConfigMap{}
	require.NoError(t, d.Get(ctx, client.ObjectKey{Namespace: "team", Name: "cm"}, got))
	assert.Equal(t, map[string]string{"a": "1", "b": "2"}, got.Labels)
}

// A list across all namespaces shows the run's objects of every namespace.
func TestClientListOfAllNamespacesShowsTheRunsObjects(t *testing.T) {
	ctx := context.Background()
	d := dryrun.NewClient(newFake(t, configMap("kept", nil)), nil)
	require.NoError(t, d.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "made"}}))

	list := &corev1.ConfigMapList{}
	require.NoError(t, d.List(ctx, list))
	var got []string
	for _, cm := range list.Items {
		got = append(got, cm.Namespace+"/"+cm.Name)
	}
	assert.ElementsMatch(t, []string{"team/kept", "other/made"}, got)
}
