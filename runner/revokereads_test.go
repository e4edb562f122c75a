package runner_test

// What Revoke reads of the pods: it lists them once, through the APIReader when there is one, and
// it lists them for a plugin that only protects pods (plugin.PodProtector) even though observe,
// which lists them for Apply's plugins, did not.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// protectingPlugin makes the ConfigMap "guard" and says every running pod depends on it. It holds
// no data-plane label and does not ask for pods on Apply.
type protectingPlugin struct{ testPlugin }

var guardRef = plugin.Ref{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Name: "guard"}

func newProtectingPlugin() *protectingPlugin {
	return &protectingPlugin{testPlugin: testPlugin{name: "protector",
		objects: func(plugin.Target) []client.Object { return []client.Object{configMap("guard", nil)} }}}
}

func (p *protectingPlugin) ProtectedPods(obs plugin.Observed) map[plugin.Ref][]string {
	var names []string
	for _, pod := range obs.Pods {
		names = append(names, pod.Name)
	}
	return map[plugin.Ref][]string{guardRef: names}
}

// protectingObserver is a protectingPlugin that lists pods on every call (a plugin.PodObserver).
type protectingObserver struct{ *protectingPlugin }

func (protectingObserver) NeedsPods() bool { return true }

// podListCounter is a fake API server with the test namespace (handed over by its owner
// annotation, so it survives the Profile) that counts the pod lists made through it.
type podListCounter struct {
	client.Client
	podLists int
}

func newPodListCounter(objs ...client.Object) *podListCounter {
	c := &podListCounter{}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}
	c.Client = fake.NewClientBuilder().WithScheme(runner.NewScheme()).WithReturnManagedFields().
		WithObjects(append([]client.Object{namespace}, objs...)...).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*corev1.PodList); ok {
					c.podLists++
				}
				return cl.List(ctx, list, opts...)
			},
		}).Build()
	return c
}

func runningPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
}

func (c *podListCounter) guardExists(t *testing.T) bool {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "guard"}, &corev1.ConfigMap{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// Without an APIReader, observe lists pods only for plugins that observe them or hold data-plane
// labels; Revoke lists them itself for a plugin that only protects pods, and keeps what the
// running pod depends on until the pod is gone.
func TestRevokeListsPodsForAPluginThatOnlyProtectsThem(t *testing.T) {
	t.Parallel()
	c := newPodListCounter()
	p := newProtectingPlugin()
	r := newRunner(t, c, p)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())
	require.True(t, c.guardExists(t))
	require.NoError(t, c.Create(context.Background(), runningPod("notebook")))

	res := r.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.True(t, c.guardExists(t), "pruned while a running pod depends on it")
	assert.NotEmpty(t, res.Waiting(), "Revoke says what it waits for")
	assert.Equal(t, runner.DefaultWaitRequeue, res.RequeueAfter())

	require.NoError(t, c.Delete(context.Background(), runningPod("notebook")))
	res = r.Revoke(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.False(t, c.guardExists(t), "kept once no pod depends on it")
	assert.Empty(t, res.Waiting())
}

// Revoke reads the pods once a call: through the Reader, where observe has listed them already,
// or through the APIReader, which observe never uses for pods.
func TestRevokeListsPodsOnce(t *testing.T) {
	t.Parallel()
	for _, withAPIReader := range []bool{false, true} {
		name := map[bool]string{false: "through the Reader", true: "through the APIReader"}[withAPIReader]
		t.Run(name, func(t *testing.T) {
			reader := newPodListCounter(runningPod("notebook"))
			direct := newPodListCounter(runningPod("notebook"))
			r := newRunner(t, reader, protectingObserver{newProtectingPlugin()})
			if withAPIReader {
				r.APIReader = direct
			}
			res := r.Revoke(context.Background(), testProfile())
			require.NoError(t, res.Err())
			if withAPIReader {
				assert.Equal(t, 0, reader.podLists, "pods read through the Reader")
				assert.Equal(t, 1, direct.podLists, "pod lists through the APIReader")
			} else {
				assert.Equal(t, 1, reader.podLists, "pod lists through the Reader")
				assert.Equal(t, 0, direct.podLists)
			}
		})
	}
}
