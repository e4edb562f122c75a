package runner_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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

// TrimConfigMap keeps of a ConfigMap what the runner and an Owns watch decide on, and nothing a
// namespace editor could grow: no data, no other label or annotation, one controller reference
// with bounded strings.
func TestTrimConfigMapKeepsOnlyWhatDecidesWhoseItIs(t *testing.T) {
	t.Parallel()
	now := metav1.Now()
	long := strings.Repeat("x", 100_000)
	in := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "waypoint-seccomp", Namespace: "alice", UID: "u-1", ResourceVersion: "42", DeletionTimestamp: &now,
			Labels:      map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "waypoint", "big": "y"},
			Annotations: map[string]string{plugin.DesiredHashAnnotation: "abc", "padding": long},
			Finalizers:  []string{"example.com/" + long},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "ConfigMap", Name: long, UID: "other"},
				{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "alice", UID: "1111-2222", Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)},
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "editor", Operation: metav1.ManagedFieldsOperationApply}},
		},
		Data:       map[string]string{"deployment": long},
		BinaryData: map[string][]byte{"blob": []byte(long)},
		Immutable:  ptrTo(true),
	}
	out, err := runner.TrimConfigMap(in.DeepCopy())
	require.NoError(t, err)
	got := out.(*corev1.ConfigMap)
	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "waypoint-seccomp", Namespace: "alice", UID: "u-1", ResourceVersion: "42", DeletionTimestamp: &now,
		Labels: map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "waypoint"},
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "alice", UID: "1111-2222", Controller: ptrTo(true)},
		}}}
	assert.Equal(t, want, got)
	again, err := runner.TrimConfigMap(got.DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, got, again, "trimming a trimmed ConfigMap changes nothing")

	forged := in.DeepCopy()
	forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: long, Name: long, UID: types.UID(long), Controller: ptrTo(true)}}
	out, err = runner.TrimConfigMap(forged)
	require.NoError(t, err)
	ref := out.(*corev1.ConfigMap).OwnerReferences[0]
	assert.Len(t, ref.Kind+ref.Name+string(ref.UID), 3*253, "a controller reference's strings are cut")

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"a": "b"}}}
	out, err = runner.TrimConfigMap(pod)
	require.NoError(t, err)
	assert.Same(t, pod, out, "other kinds pass unchanged")
}

// TrimRoleBindingMetadata keeps of a metadata-only RoleBinding what the access plugin, the
// controller's watch and the runner read, byte for byte, and nothing a Profile owner (who may
// create RoleBindings) could grow: no other annotation or label, no managedFields or finalizers.
func TestTrimRoleBindingMetadataKeepsOnlyWhatTheAccessPluginReads(t *testing.T) {
	t.Parallel()
	created, deleted := metav1.Unix(1764590400, 0), metav1.Unix(1764594000, 0)
	long := strings.Repeat("x", 200<<10)
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "user-carol-example-com-clusterrole-edit", Namespace: "alice", UID: "u-1", ResourceVersion: "42", Generation: 3,
		CreationTimestamp: created, DeletionTimestamp: &deleted, GenerateName: long, Finalizers: []string{"example.com/" + long},
		Labels:      map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "authz", "padding": long[:63]},
		Annotations: map[string]string{"user": "carol@example.com", "role": "edit", "padding": long},
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: long, UID: "other"},
			{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "alice", UID: "1111-2222", Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)},
		},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kfam", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:padding":"` + long + `"}}}`)}},
	}}
	in.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
	out, err := runner.TrimRoleBindingMetadata(in.DeepCopy())
	require.NoError(t, err)
	data, err := json.Marshal(out)
	require.NoError(t, err)
	assert.JSONEq(t, `{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{
		"name":"user-carol-example-com-clusterrole-edit","namespace":"alice","uid":"u-1","resourceVersion":"42",
		"creationTimestamp":"2025-12-01T12:00:00Z","deletionTimestamp":"2025-12-01T13:00:00Z",
		"labels":{"app.kubernetes.io/managed-by":"profile-plugins","profile-plugins.kubeflow-ambient.io/plugin":"authz"},
		"annotations":{"role":"edit","user":"carol@example.com"},
		"ownerReferences":[{"apiVersion":"kubeflow.org/v1","kind":"Profile","name":"alice","uid":"1111-2222","controller":true}]}}`, string(data))
	again, err := runner.TrimRoleBindingMetadata(out)
	require.NoError(t, err)
	assert.Equal(t, out, again, "trimming a trimmed RoleBinding changes nothing")

	bare := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "viewers", Namespace: "alice", UID: "u-2", ResourceVersion: "7",
		Annotations: map[string]string{"padding": long}}}
	bare.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
	out, err = runner.TrimRoleBindingMetadata(bare)
	require.NoError(t, err)
	data, err = json.Marshal(out)
	require.NoError(t, err)
	assert.JSONEq(t, `{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{
		"name":"viewers","namespace":"alice","uid":"u-2","resourceVersion":"7"}}`, string(data),
		"a binding without kfam's annotations keeps none")

	// A fork's controller may read and update its own bindings through the cache: typed ones, and
	// metadata of another kind, pass unchanged.
	typed := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "namespaceAdmin", Annotations: map[string]string{"padding": long}}}
	out, err = runner.TrimRoleBindingMetadata(typed)
	require.NoError(t, err)
	assert.Same(t, typed, out)
	other := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "cm", Annotations: map[string]string{"padding": long}}}
	other.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	out, err = runner.TrimRoleBindingMetadata(other)
	require.NoError(t, err)
	assert.Same(t, other, out)
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
