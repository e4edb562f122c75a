package runner_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

var policyGVK = istiosecurityv1.SchemeGroupVersion.WithKind("AuthorizationPolicy")

// unservedEnv is a cluster whose listing of AuthorizationPolicies fails with listErr, as a
// client or cache answers for a kind whose CRD is not installed (or was removed).
func unservedEnv(t *testing.T, listErr error, mapper meta.RESTMapper) client.Client {
	t.Helper()
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}
	b := fake.NewClientBuilder().WithScheme(runner.NewScheme()).WithReturnManagedFields().WithObjects(namespace).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*istiosecurityv1.AuthorizationPolicyList); ok {
					return listErr
				}
				return c.List(ctx, list, opts...)
			},
		})
	if mapper != nil {
		b = b.WithRESTMapper(mapper)
	}
	return b.Build()
}

func labelsOnly(name string, labels map[string]string) *testPlugin {
	return &testPlugin{name: name, labels: labels}
}

func wantsPolicy(name string) *testPlugin {
	return &testPlugin{
		name:    name,
		objects: func(plugin.Target) []client.Object { return []client.Object{policy("owner", "kubeflow")} },
		labels:  map[string]string{"istio.io/dataplane-mode": "ambient"},
	}
}

// A kind the API server does not serve has no objects: a plugin that lists it but writes none of
// it converges (sidecar mode's waypoint plugin lists Gateways so).
func TestAKindNotServedIsObservedAsEmpty(t *testing.T) {
	t.Parallel()
	noMatch := &meta.NoKindMatchError{GroupKind: policyGVK.GroupKind(), SearchedVersions: []string{"v1"}}
	for name, listErr := range map[string]error{
		"no mapping":  noMatch,
		"CRD removed": apierrors.NewNotFound(schema.GroupResource{Group: "security.istio.io", Resource: "authorizationpolicies"}, ""),
	} {
		t.Run(name, func(t *testing.T) {
			c := unservedEnv(t, listErr, nil)
			res := newRunner(t, c, labelsOnly("mesh", map[string]string{"istio-injection": "enabled"})).Apply(context.Background(), testProfile())
			require.NoError(t, res.Err())
			assert.Equal(t, []string{"istio-injection"}, res.Plugins[0].LabelsSet)
			assert.Empty(t, res.Waiting())
		})
	}
}

// A plugin that wants to write a kind the API server does not serve fails as a whole: the error
// names the object and the CRD to install, it is retried (installing the CRD fixes it), and none of
// the plugin's labels is set; another plugin is not held up.
func TestAPluginThatWantsAKindNotServedFailsClosedNamingTheCRD(t *testing.T) {
	t.Parallel()
	c := unservedEnv(t, &meta.NoKindMatchError{GroupKind: policyGVK.GroupKind(), SearchedVersions: []string{"v1"}}, nil)
	res := newRunner(t, c, wantsPolicy("mesh"), labelsOnly("pss", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})).
		Apply(context.Background(), testProfile())

	require.Len(t, res.Plugins[0].Errors, 1)
	msg := res.Plugins[0].Errors[0].Error()
	assert.Contains(t, msg, "AuthorizationPolicy.security.istio.io/owner")
	assert.Contains(t, msg, "install the CRD authorizationpolicies.security.istio.io, version v1")
	assert.False(t, errors.Is(res.Err(), plugin.ErrInput), "a missing CRD is not the Profile's fault: %v", res.Err())
	assert.True(t, res.Retryable())
	assert.Empty(t, res.Plugins[0].LabelsSet)
	assert.Empty(t, res.Plugins[0].Created)

	assert.Empty(t, res.Plugins[1].Errors)
	assert.Equal(t, []string{"pod-security.kubernetes.io/enforce"}, res.Plugins[1].LabelsSet)
	n := &corev1.Namespace{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: ns}, n))
	assert.NotContains(t, n.Labels, "istio.io/dataplane-mode")
}

// A cache with ReaderFailOnMissingInformer refuses a kind it has no informer for: it counts as not
// served only when the mapper does not know the kind either, otherwise it is the error it is.
func TestACacheThatRefusesAKindAsksTheMapper(t *testing.T) {
	t.Parallel()
	notCached := &cache.ErrResourceNotCached{GVK: policyGVK}

	unknown := meta.NewDefaultRESTMapper(nil)
	res := newRunner(t, unservedEnv(t, notCached, unknown), labelsOnly("mesh", map[string]string{"istio-injection": "enabled"})).
		Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())

	known := meta.NewDefaultRESTMapper(nil)
	known.Add(policyGVK, meta.RESTScopeNamespace)
	res = newRunner(t, unservedEnv(t, notCached, known), labelsOnly("mesh", map[string]string{"istio-injection": "enabled"})).
		Apply(context.Background(), testProfile())
	require.Error(t, res.Err())
	assert.Contains(t, res.Err().Error(), "is not cached")
	assert.Empty(t, res.Plugins[0].LabelsSet)
}

// Any other List failure stops the call as before: an empty observation would look like a
// namespace without policies.
func TestOtherListErrorsStillStopTheCall(t *testing.T) {
	t.Parallel()
	c := unservedEnv(t, apierrors.NewServiceUnavailable("etcd is away"), nil)
	res := newRunner(t, c, labelsOnly("mesh", map[string]string{"istio-injection": "enabled"})).Apply(context.Background(), testProfile())
	require.Error(t, res.Err())
	assert.Contains(t, res.Err().Error(), "etcd is away")
	assert.Empty(t, res.Plugins[0].LabelsSet)
}
