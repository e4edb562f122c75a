package plugin_test

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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

func controllerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	controller := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &controller}
}

// nsWith is the namespace "alice" with the given owner annotation ("" for none) and owner references.
func nsWith(owner string, refs ...metav1.OwnerReference) *corev1.Namespace {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, OwnerReferences: refs}}
	if owner != "-" {
		n.Annotations = map[string]string{plugin.OwnerAnnotation: owner}
	}
	return n
}

func TestNamespacePolicyCheck(t *testing.T) {
	profile := testProfile() // alice, uid 1111-2222, owner alice@example.com
	ours := controllerRef("kubeflow.org/v1", "Profile", ns, profile.UID)
	cases := []struct {
		name   string
		policy plugin.NamespacePolicy
		ns     *corev1.Namespace
		// wantRule is "" when the namespace is the Profile's, else a part of the refusal's rule.
		wantRule string
	}{
		{"controller reference and annotation", plugin.NamespacePolicy{}, nsWith("alice@example.com", ours), ""},
		{"controller reference only", plugin.NamespacePolicy{}, nsWith("-", ours), ""},
		{"controller reference of v1beta1", plugin.NamespacePolicy{}, nsWith("-", controllerRef("kubeflow.org/v1beta1", "Profile", ns, profile.UID)), ""},
		{"annotation only", plugin.NamespacePolicy{}, nsWith("alice@example.com"), ""},
		{"nothing", plugin.NamespacePolicy{}, nsWith("-"), `no "owner" annotation`},
		{"another owner", plugin.NamespacePolicy{}, nsWith("bob@example.com"), `"owner" annotation is "bob@example.com", not the Profile's spec.owner.name "alice@example.com"`},
		{"empty annotation", plugin.NamespacePolicy{}, nsWith(""), `"owner" annotation is ""`},
		{"annotation differs in case", plugin.NamespacePolicy{}, nsWith("Alice@example.com"), `not the Profile's spec.owner.name`},
		{"an earlier Profile of the same name", plugin.NamespacePolicy{}, nsWith("alice@example.com", controllerRef("kubeflow.org/v1", "Profile", ns, "old-uid")),
			`controlled by Profile "alice" (uid old-uid), not by this Profile (uid 1111-2222)`},
		{"controlled by another kind with our UID", plugin.NamespacePolicy{}, nsWith("alice@example.com", controllerRef("example.com/v1", "Profile", ns, profile.UID)),
			`controlled by Profile "alice"`},
		{"controlled by something else", plugin.NamespacePolicy{}, nsWith("alice@example.com", controllerRef("apps/v1", "Deployment", "x", "u")),
			`controlled by Deployment "x"`},
		{"a non-controller reference is not ownership", plugin.NamespacePolicy{RequireOwnerReference: true},
			nsWith("alice@example.com", metav1.OwnerReference{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: ns, UID: profile.UID}),
			"which namespaces.ownership: ownerReference requires"},
		{"strict: controller reference", plugin.NamespacePolicy{RequireOwnerReference: true}, nsWith("-", ours), ""},
		{"strict: annotation is not enough", plugin.NamespacePolicy{RequireOwnerReference: true}, nsWith("alice@example.com"),
			"no controller owner reference to this Profile, which namespaces.ownership: ownerReference requires"},
		{"reserved even when owned", plugin.NamespacePolicy{Reserved: []string{"ali*"}}, nsWith("alice@example.com", ours),
			`reserved (it matches "ali*"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Check(profile, tc.ns)
			if tc.wantRule == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, plugin.ErrNamespaceRefused)
			assert.ErrorIs(t, err, plugin.ErrInput, "a refusal is not retried")
			assert.Contains(t, err.Error(), `namespace "alice" is not written for profile "alice"`)
			assert.Contains(t, err.Error(), tc.wantRule)
		})
	}
}

func TestNamespacePolicyCheckRefusesAnotherNamespace(t *testing.T) {
	other := nsWith("alice@example.com", controllerRef("kubeflow.org/v1", "Profile", ns, "1111-2222"))
	other.Name = "bob"
	assert.ErrorContains(t, plugin.NamespacePolicy{}.Check(testProfile(), other), "has the Profile's name")
}

func TestReservedBy(t *testing.T) {
	var zero plugin.NamespacePolicy
	for _, name := range []string{"kube-system", "kube-public", "kube-node-lease", "kube-anything", "default"} {
		pattern, ok := zero.ReservedBy(name)
		assert.True(t, ok, "%s is reserved by every policy, the zero one included", name)
		assert.NotEmpty(t, pattern)
	}
	for _, name := range []string{"kube", "kubeflow", "defaults", "alice", "istio-system"} {
		_, ok := zero.ReservedBy(name)
		assert.False(t, ok, "%s is not reserved by the zero policy", name)
	}
	p := plugin.NamespacePolicy{Reserved: []string{"istio-system", "kubeflow", "team-?"}}
	for name, want := range map[string]string{"istio-system": "istio-system", "kubeflow": "kubeflow", "team-a": "team-?", "kube-system": "kube-*"} {
		got, ok := p.ReservedBy(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, got, name)
	}
	_, ok := p.ReservedBy("team-ab")
	assert.False(t, ok)
}

// countingClient is a fake API server holding objs that counts every write.
func countingClient(t *testing.T, writes *int, objs ...client.Object) client.Client {
	t.Helper()
	count := func() { *writes++ }
	return fake.NewClientBuilder().WithScheme(plugin.NewScheme()).WithReturnManagedFields().WithObjects(objs...).
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
	profile := testProfile()
	cases := []struct {
		name     string
		policy   plugin.NamespacePolicy
		profile  string
		ns       *corev1.Namespace
		wantRule string
	}{
		{"unowned", plugin.NamespacePolicy{}, ns, nsWith("-"), `no "owner" annotation`},
		{"another owner's", plugin.NamespacePolicy{}, ns, nsWith("bob@example.com"), `"owner" annotation is "bob@example.com"`},
		{"annotation under the strict rule", plugin.NamespacePolicy{RequireOwnerReference: true}, ns, nsWith("alice@example.com"), "ownerReference requires"},
		{"reserved by configuration", plugin.NamespacePolicy{Reserved: []string{"alice"}}, ns,
			nsWith("alice@example.com", controllerRef("kubeflow.org/v1", "Profile", ns, profile.UID)), `reserved (it matches "alice"`},
		{"kube-system", plugin.NamespacePolicy{}, "kube-system", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system",
			Annotations: map[string]string{plugin.OwnerAnnotation: "alice@example.com"}}}, `reserved (it matches "kube-*"`},
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
			require.ErrorIs(t, res.Err(), plugin.ErrNamespaceRefused)
			assert.False(t, res.Retryable(), "a refusal is an input error")
			cond := res.Condition()
			assert.Equal(t, "False", cond.Status)
			assert.Contains(t, cond.Message, `namespace "`+tc.profile+`" is not written for profile "`+tc.profile+`"`)
			assert.Contains(t, cond.Message, tc.wantRule)

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
	profile := testProfile()
	for name, n := range map[string]*corev1.Namespace{
		"by controller reference": nsWith("-", controllerRef("kubeflow.org/v1", "Profile", ns, profile.UID)),
		"by annotation":           nsWith("alice@example.com"),
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
	writes := 0
	c := countingClient(t, &writes)
	p := testProfile()
	p.Name = "kube-system"
	res := newRunner(t, c, writingPlugin()).Apply(context.Background(), p)
	require.ErrorIs(t, res.Err(), plugin.ErrNamespaceRefused)
	assert.NotErrorIs(t, res.Err(), plugin.ErrNamespaceNotFound)
	assert.Zero(t, writes)
}

// A failure to read the namespace is not a refusal: it is retried, and nothing is written.
func TestNamespaceReadErrorIsRetryable(t *testing.T) {
	writes := 0
	base := countingClient(t, &writes, nsWith("alice@example.com"))
	c := interceptor.NewClient(base.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				return apierrors.NewServiceUnavailable("etcd is down")
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r := newRunner(t, c, writingPlugin())
	for _, res := range []*plugin.Result{r.Apply(context.Background(), testProfile()), r.Revoke(context.Background(), testProfile())} {
		require.Error(t, res.Err())
		assert.True(t, res.Retryable())
		assert.False(t, errors.Is(res.Err(), plugin.ErrNamespaceRefused))
	}
	assert.Zero(t, writes)
}
