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
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
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
	t.Parallel()
	env := envtest.Start(t) // a ByObject entry is mapped to its resource when the manager is made
	managed := cache.ByObject{Label: plugin.ManagedSelector()}
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
		{"a default label selector", cache.Options{DefaultLabelSelector: plugin.ManagedSelector()}, nil},
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

// WithManager tells the runner which kinds the manager's cache transforms, so that it reads a
// wanted object of those in full: a transform may drop the content and managedFields that the
// drift checks read.
func TestWithManagerReadsInFullWhatTheCacheTransforms(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	all := []schema.GroupKind{policyGK, bindingGK, gatewayGK, configMapGK}
	for _, tc := range []struct {
		name string
		opts cache.Options
		want []schema.GroupKind
	}{
		{"the plugins' options trim ConfigMaps and RoleBindings", plugins.CacheOptions(), []schema.GroupKind{configMapGK, bindingGK}},
		{"no transform", cache.Options{}, nil},
		{"a default transform reaches every kind", cache.Options{DefaultTransform: cache.TransformStripManagedFields()}, all},
		{"a transform for some namespaces only", cache.Options{ByObject: map[client.Object]cache.ByObject{
			&gatewayv1.Gateway{}: {Namespaces: map[string]cache.Config{"alice": {Transform: cache.TransformStripManagedFields()}}}}},
			[]schema.GroupKind{gatewayGK}},
		{"a default transform for some namespaces", cache.Options{DefaultNamespaces: map[string]cache.Config{
			"alice": {Transform: cache.TransformStripManagedFields()}}}, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mgr, err := ctrl.NewManager(env.Base, ctrl.Options{Scheme: runner.NewScheme(),
				Cache: tc.opts, Metrics: metricsserver.Options{BindAddress: "0"}})
			require.NoError(t, err)
			r, err := plugins.NewRunner(mgr.GetClient(), config.Default(), plugins.WithManager(mgr, tc.opts))
			require.NoError(t, err)
			assert.ElementsMatch(t, tc.want, r.Trimmed)
		})
	}
}

// Cache options whose EndpointSlice transform drops a label the plugins read would make the
// waypoint decide on slices without it: a Runner is refused such options, and given the options of
// its own plugins. Without mesh.waypoint.ignoredServices the plugins' options of no plugin do.
func TestWithManagerRefusesACacheThatDropsAnEndpointSliceLabelThePluginsRead(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	ignoring := fixture.Config(t, "mesh: {waypoint: {provision: onDemand, ignoredServices: {matchLabels: {always-on: \"true\"}}}}\n")
	ps, err := plugins.New(ignoring)
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		cfg     *config.Config
		opts    cache.Options
		refused bool
	}{
		{"ignoredServices, the options of no plugin", ignoring, plugins.CacheOptions(), true},
		{"ignoredServices, the options of its plugins", ignoring, plugins.CacheOptions(ps...), false},
		{"onDemand alone, the options of no plugin", fixture.Config(t, "mesh: {waypoint: {provision: onDemand}}\n"), plugins.CacheOptions(), false},
		{"no transform", ignoring, cache.Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mgr, err := ctrl.NewManager(env.Base, ctrl.Options{Scheme: runner.NewScheme(),
				Cache: tc.opts, Metrics: metricsserver.Options{BindAddress: "0"}})
			require.NoError(t, err)
			_, err = plugins.NewRunner(mgr.GetClient(), tc.cfg, plugins.WithManager(mgr, tc.opts))
			if !tc.refused {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), `drops label "always-on"`)
		})
	}
}
