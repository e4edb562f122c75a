package runner_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// countingClient is a fake API server holding objs that counts every write.
func countingClient(t *testing.T, writes *int, objs ...client.Object) client.Client {
	t.Helper()
	count := func() { *writes++ }
	return fake.NewClientBuilder().WithScheme(runner.NewScheme()).WithReturnManagedFields().WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
				count()
				return c.Apply(ctx, obj, opts...)
			},
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				count()
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				count()
				return c.Update(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				count()
				return c.Patch(ctx, obj, patch, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				count()
				return c.Delete(ctx, obj, opts...)
			},
		}).Build()
}

func writingPlugin() *testPlugin {
	return &testPlugin{
		name:    "mesh",
		objects: func(plugin.Target) []client.Object { return []client.Object{configMap("cfg", nil)} },
		labels:  map[string]string{"istio.io/dataplane-mode": "ambient"},
	}
}

// Apply and Revoke write nothing into a namespace that is not the Profile's, and say why in the
// condition; Revoke succeeds, so a Profile that never had its namespace can still be deleted.
func TestApplyAndRevokeLeaveANamespaceThatIsNotTheProfilesAlone(t *testing.T) {
	t.Parallel()
	profile := testProfile()
	cases := []struct {
		name     string
		policy   ownership.Policy
		profile  string
		ns       *corev1.Namespace
		wantRule string
	}{
		{"unowned", ownership.Policy{}, ns, fixture.Namespace(ns, "-"), `no "owner" annotation`},
		{"another owner's", ownership.Policy{}, ns, fixture.Namespace(ns, "bob@example.com"), `"owner" annotation is "bob@example.com"`},
		{"annotation under the strict rule", ownership.Policy{RequireOwnerReference: true}, ns, fixture.Namespace(ns, "alice@example.com"), "ownerReference requires"},
		{"reserved by configuration", ownership.Policy{Reserved: []string{"alice"}}, ns,
			fixture.Namespace(ns, "alice@example.com", fixture.ControllerRef("kubeflow.org/v1", "Profile", ns, profile.UID)), `reserved (it matches "alice"`},
		{"kube-system", ownership.Policy{}, "kube-system", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system",
			Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}, `reserved (it matches "kube-*"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			writes := 0
			c := countingClient(t, &writes, tc.ns)
			r := newRunner(t, c, writingPlugin())
			r.Namespaces = tc.policy
			p := profile.DeepCopy()
			p.Name = tc.profile

			res := r.Apply(context.Background(), p)
			assert.Zero(t, writes, "no write may reach the namespace")
			require.ErrorIs(t, res.Err(), ownership.ErrNamespaceRefused)
			assert.False(t, res.Retryable(), "a refusal is an input error")
			ready, msg := res.Summary()
			assert.False(t, ready)
			assert.Contains(t, msg, `namespace "`+tc.profile+`" is not written for profile "`+tc.profile+`"`)
			assert.Contains(t, msg, tc.wantRule)

			// Someone else's objects and labels there must survive a revoke as well.
			foreign := configMap("cfg", nil)
			foreign.Namespace = tc.profile
			foreign.Labels = map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "mesh"}
			require.NoError(t, c.Create(context.Background(), foreign))
			writes = 0
			res = r.Revoke(context.Background(), p)
			assert.Zero(t, writes, "revoke must not touch a namespace that is not the Profile's")
			require.NoError(t, res.Err(), "nothing of the Profile's is there, so revoke succeeds")
			require.Len(t, res.Warnings(), 1)
			assert.Contains(t, res.Warnings()[0], "nothing revoked there")
			require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(foreign), &corev1.ConfigMap{}))
		})
	}
}

func TestApplyWritesIntoANamespaceThatIsTheProfiles(t *testing.T) {
	t.Parallel()
	profile := testProfile()
	for name, n := range map[string]*corev1.Namespace{
		"by controller reference": fixture.Namespace(ns, "-", fixture.ControllerRef("kubeflow.org/v1", "Profile", ns, profile.UID)),
		"by annotation":           fixture.Namespace(ns, "alice@example.com"),
	} {
		t.Run(name, func(t *testing.T) {
			writes := 0
			c := countingClient(t, &writes, n)
			res := newRunner(t, c, writingPlugin()).Apply(context.Background(), profile)
			require.NoError(t, res.Err())
			assert.Equal(t, 2, writes, "the object and the label")
		})
	}
}

// A reserved namespace is refused before it is read: it may not exist yet, and a missing
// reserved namespace must not read as "not found, create it".
func TestReservedNamespaceIsRefusedEvenWhenMissing(t *testing.T) {
	t.Parallel()
	writes := 0
	c := countingClient(t, &writes)
	p := testProfile()
	p.Name = "kube-system"
	res := newRunner(t, c, writingPlugin()).Apply(context.Background(), p)
	require.ErrorIs(t, res.Err(), ownership.ErrNamespaceRefused)
	assert.NotErrorIs(t, res.Err(), runner.ErrNamespaceNotFound)
	assert.Zero(t, writes)
}

// A failure to read the namespace is not a refusal: it is retried, and nothing is written.
func TestNamespaceReadErrorIsRetryable(t *testing.T) {
	t.Parallel()
	writes := 0
	base := countingClient(t, &writes, fixture.Namespace(ns, "alice@example.com"))
	c := interceptor.NewClient(base.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				return apierrors.NewServiceUnavailable("etcd is down")
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r := newRunner(t, c, writingPlugin())
	for _, res := range []*runner.Result{r.Apply(context.Background(), testProfile()), r.Revoke(context.Background(), testProfile())} {
		require.Error(t, res.Err())
		assert.True(t, res.Retryable())
		assert.False(t, errors.Is(res.Err(), ownership.ErrNamespaceRefused))
	}
	assert.Zero(t, writes)
}
