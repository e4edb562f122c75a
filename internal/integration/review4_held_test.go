package integration

// What the fourth review of Dec 1 (review4) tried that held.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

// A namespace deleted and created again under the same name while the runner's cache still shows
// the old one: the label write names the old UID, the API server refuses it, and the new namespace
// gets no enrolment label (fail closed) although the call goes on to create the objects.
func TestALabelWriteNamingARecreatedNamespacesOldUIDFailsClosedOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	root := env.Client
	ctx := context.Background()
	p := profileIn(t, root, "recreated")
	old := &corev1.Namespace{}
	require.NoError(t, root.Get(ctx, client.ObjectKey{Name: p.Name}, old))

	cs, err := kubernetes.NewForConfig(env.Base)
	require.NoError(t, err)
	require.NoError(t, cs.CoreV1().Namespaces().Delete(ctx, p.Name, metav1.DeleteOptions{}))
	n, err := cs.CoreV1().Namespaces().Get(ctx, p.Name, metav1.GetOptions{})
	require.NoError(t, err)
	n.Spec.Finalizers = nil
	_, err = cs.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 10*time.Second, 50*time.Millisecond)
	require.NoError(t, root.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Name,
		Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}))

	// The cache lags: it still shows the namespace as it was, old UID and all.
	ww, err := client.NewWithWatch(env.Base, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	stale := interceptor.NewClient(ww, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if nsObj, isNamespace := obj.(*corev1.Namespace); isNamespace && key.Name == p.Name {
				old.DeepCopyInto(nsObj)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r := runnerFor(t, root, config.ModeAmbient)
	r.Reader = stale
	var errs []string
	for range 3 {
		res := r.Apply(ctx, p)
		if res.Err() != nil {
			errs = append(errs, res.Err().Error())
		}
	}
	require.NotEmpty(t, errs, "every label write names the old UID")
	assert.Contains(t, errs[0], "uid", "the API server refuses the write for its UID: %v", errs)
	labels := namespaceLabels(t, root, p.Name)
	for _, k := range []string{"istio.io/dataplane-mode", "istio.io/use-waypoint", "istio.io/ingress-use-waypoint", "pod-security.kubernetes.io/enforce"} {
		assert.NotContains(t, labels, k, "the new namespace got a label from a write meant for the old one")
	}
	t.Logf("errors: %v", errs)
}
