package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

var (
	policyGK    = schema.GroupKind{Group: "security.istio.io", Kind: "AuthorizationPolicy"}
	gatewayGK   = schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "Gateway"}
	bindingGK   = schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}
	configMapGK = schema.GroupKind{Kind: "ConfigMap"}
)

// WithManager tells the runner which kinds the manager's cache shows in full, from the same options
// the manager was built with; whatever it cannot vouch for, it leaves to a direct read.
func TestWithManagerReadsDirectlyOnlyWhatTheCacheMaySelect(t *testing.T) {
	env := envtest.Start(t) // a ByObject entry is mapped to its resource when the manager is made
	managed := cache.ByObject{Label: runner.ManagedSelector()}
	for _, tc := range []struct {
		name string
		opts cache.Options
		want []schema.GroupKind
	}{
		{"the plugins' options", plugins.CacheOptions(), []schema.GroupKind{policyGK, bindingGK, gatewayGK}},
		{"no selector at all", cache.Options{}, []schema.GroupKind{policyGK, bindingGK, gatewayGK, configMapGK}},
		{"policies selected too", cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: managed, &istiosecurityv1.AuthorizationPolicy{}: managed}}, []schema.GroupKind{bindingGK, gatewayGK}},
		{"policies in some namespaces only", cache.Options{ByObject: map[client.Object]cache.ByObject{
			&istiosecurityv1.AuthorizationPolicy{}: {Namespaces: map[string]cache.Config{"kubeflow": {}}}}},
			[]schema.GroupKind{bindingGK, gatewayGK, configMapGK}},
		{"an entry that selects nothing", cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.Everything()}}}, []schema.GroupKind{policyGK, bindingGK, gatewayGK, configMapGK}},
		{"a default label selector", cache.Options{DefaultLabelSelector: runner.ManagedSelector()}, nil},
		{"default namespaces", cache.Options{DefaultNamespaces: map[string]cache.Config{"alice": {}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mgr, err := ctrl.NewManager(env.Base, ctrl.Options{Scheme: runner.NewScheme(),
				Cache: tc.opts, Metrics: metricsserver.Options{BindAddress: "0"}})
			require.NoError(t, err)
			r, err := plugins.NewRunner(mgr.GetClient(), config.Default(), plugins.WithManager(mgr, tc.opts))
			require.NoError(t, err)
			assert.Same(t, mgr.GetAPIReader(), r.APIReader)
			assert.ElementsMatch(t, tc.want, r.FullyCached)
			if tc.want == nil {
				assert.Nil(t, r.FullyCached, "nil: every missing wanted object is read")
			}
		})
	}
}
