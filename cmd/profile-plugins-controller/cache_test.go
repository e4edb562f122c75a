package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// collectionReads records the manager's reads of whole collections (list and watch requests), which
// is what each informer sends: GET /api/v1/configmaps?labelSelector=...&watch=true.
type collectionReads struct {
	mu   sync.Mutex
	reqs []collectionRead
}

type collectionRead struct {
	resource    string
	namespace   string // "" for a cluster-wide read
	selector    string
	watch       bool
	group       string
	description string
}

func (c *collectionReads) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if read, ok := parseCollectionRead(r); ok {
			c.mu.Lock()
			c.reqs = append(c.reqs, read)
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

// parseCollectionRead reads a GET of /api/v1/[namespaces/NS/]RESOURCE or
// /apis/GROUP/VERSION/[namespaces/NS/]RESOURCE; a GET of one object is not a collection read.
func parseCollectionRead(r *http.Request) (collectionRead, bool) {
	if r.Method != http.MethodGet {
		return collectionRead{}, false
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return collectionRead{}, false
	}
	read := collectionRead{group: group, selector: r.URL.Query().Get("labelSelector"), watch: r.URL.Query().Get("watch") == "true",
		description: r.URL.String()}
	switch {
	case len(parts) == 1:
		read.resource = parts[0]
	case len(parts) == 3 && parts[0] == "namespaces":
		read.namespace, read.resource = parts[1], parts[2]
	default:
		return collectionRead{}, false
	}
	return read, true
}

func (c *collectionReads) all() []collectionRead {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reqs)
}

// The manager starts no cluster-wide informer on Pods or Secrets, and its ConfigMap informer holds
// only the plugins' own (issue 14): the test records every list and watch the manager sends while a
// Profile with other people's Pods, ConfigMaps and Secrets in its namespace goes through creation,
// enrolment, routing and deletion, and checks each one. Pods are read past the cache, in the one
// namespace (Pod Security's preflight, the revoke).
func TestManagerCachesNoPodsConfigMapsOrSecretsClusterWide(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	reads := &collectionReads{}
	restCfg := rest.CopyConfig(env.Base)
	restCfg.WrapTransport = reads.wrap
	cfg := config.Default()
	cfg.Mesh.Waypoint.SeccompPatch = ptrTo(true) // a ConfigMap of the plugins' own, whatever the default
	require.NoError(t, cfg.Validate())
	ctx := startManager(t, restCfg, ctrl.Options{}, cfg, only(nil, "inez"))
	c := env.Client
	h := &harness{t: t, env: env}

	const ns = "inez"
	createProfile(t, c, ns, "inez@example.com")
	require.Eventually(t, func() bool { return c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}) == nil },
		20*time.Second, 100*time.Millisecond, "the reconciler creates the namespace")
	for _, obj := range []client.Object{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "notebook-config", Namespace: ns}, Data: map[string]string{"k": "v"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "notebook-token", Namespace: ns}, StringData: map[string]string{"k": "v"}},
	} {
		require.NoError(t, c.Create(ctx, obj))
	}
	labelled := func(key, value string) func() bool {
		return func() bool {
			n := &corev1.Namespace{}
			return c.Get(ctx, client.ObjectKey{Name: ns}, n) == nil && n.Labels[key] == value
		}
	}
	require.Eventually(t, labelled("istio.io/dataplane-mode", "ambient"), 20*time.Second, 100*time.Millisecond)
	h.programWaypoint(ns)
	require.Eventually(t, labelled("istio.io/use-waypoint", "waypoint"), 20*time.Second, 100*time.Millisecond)
	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "waypoint-seccomp"}, cm), "the plugins' own ConfigMap")

	require.NoError(t, c.Delete(ctx, &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: ns}, &profilev1.Profile{}))
	}, 20*time.Second, 100*time.Millisecond, "revoked, finalizer removed")

	var informers []string
	podsReadInNamespace := false
	for _, r := range reads.all() {
		if r.watch {
			informers = append(informers, r.group+"/"+r.resource+"?"+r.selector)
		}
		if r.group != "" {
			continue
		}
		switch r.resource {
		case "pods", "secrets":
			assert.NotEmpty(t, r.namespace, "cluster-wide read of %s: %s", r.resource, r.description)
			assert.False(t, r.watch, "a watch on %s: %s", r.resource, r.description)
			podsReadInNamespace = podsReadInNamespace || (r.resource == "pods" && r.namespace == ns)
		case "configmaps":
			if r.namespace == "" {
				assert.Equal(t, plugin.ManagedByLabel+"="+plugin.ManagedByValue, r.selector, "a ConfigMap read without the managed-by selector: %s", r.description)
			}
		}
	}
	slices.Sort(informers)
	informers = slices.Compact(informers)
	t.Logf("informers started: %v", informers)
	assert.Contains(t, informers, "/configmaps?"+plugin.ManagedByLabel+"="+plugin.ManagedByValue, "the recording sees the ConfigMap informer")
	assert.Contains(t, informers, "rbac.authorization.k8s.io/rolebindings?")
	assert.True(t, podsReadInNamespace, "pods are read past the cache, in the namespace: the preflight and the revoke need them")
}

// The example's cache options are the library's: a fork copies plugins.CacheByObject too.
func TestCacheOptionsSelectTheManagedConfigMaps(t *testing.T) {
	t.Parallel()
	opts := cacheOptions()
	require.Len(t, opts.ByObject, 3, "ConfigMaps, EndpointSlices and RoleBinding metadata")
	for obj, by := range opts.ByObject {
		switch obj.(type) {
		case *corev1.ConfigMap:
			assert.Equal(t, plugin.ManagedSelector().String(), by.Label.String())
			assert.NotNil(t, by.Transform, "ConfigMaps are cached trimmed")
		case *discoveryv1.EndpointSlice:
			assert.Nil(t, by.Label, "every Service's slices count, so none is selected away")
			assert.NotNil(t, by.Transform, "EndpointSlices are cached trimmed")
		case *metav1.PartialObjectMetadata:
			// The key of the watch's and the plugin's metadata-only informer.
			assert.Equal(t, rbacv1.SchemeGroupVersion.WithKind("RoleBinding"), obj.GetObjectKind().GroupVersionKind())
			assert.Nil(t, by.Label, "kfam marks its bindings with annotations only, so none is selected away")
			assert.NotNil(t, by.Transform, "RoleBindings are cached trimmed")
		default:
			t.Errorf("unexpected cache option for %T", obj)
		}
	}
	assert.Nil(t, opts.DefaultLabelSelector, "other kinds are not selected")
}

// A Reconciler built for a manager reads past the cache through the manager's API reader.
func TestManagedReconcilerHasAnAPIReader(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	mgr, err := ctrl.NewManager(env.Base, ctrl.Options{Scheme: envtest.NewScheme(), Cache: cacheOptions()})
	require.NoError(t, err)
	r, err := newManagedReconciler(mgr, config.Default())
	require.NoError(t, err)
	assert.Same(t, mgr.GetAPIReader(), r.Runner.APIReader)
	assert.ElementsMatch(t, []schema.GroupKind{
		{Group: "security.istio.io", Kind: "AuthorizationPolicy"},
		{Group: "gateway.networking.k8s.io", Kind: "Gateway"},
		{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"},
	}, r.Runner.FullyCached, "ConfigMaps are selected, so a wanted one the cache hides is read")
}

// namespaceReads records the GETs (reads of one object, and lists) inside one namespace's path,
// /api/v1/namespaces/NS/... or /apis/GROUP/VERSION/namespaces/NS/...: what the runner reads past
// the manager's cache, whose informers read cluster-wide.
type namespaceReads struct {
	mu    sync.Mutex
	paths map[string][]string
}

func (n *namespaceReads) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if i := slices.Index(parts, "namespaces"); r.Method == http.MethodGet && i >= 0 && len(parts) > i+2 {
			n.mu.Lock()
			if n.paths == nil {
				n.paths = map[string][]string{}
			}
			n.paths[parts[i+1]] = append(n.paths[parts[i+1]], r.URL.Path)
			n.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (n *namespaceReads) in(ns string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.paths[ns])
}

// A new namespace's first reconcile, wired as this controller is, reads nothing past the cache
// (issue 14: the baseline reads nothing either), although the namespace already runs a pod that
// the new enforce level forbids and holds other people's ConfigMaps: the policies and the Gateway
// are fully cached, so a missing one is missing; the namespace has never been in a mesh, so no
// decision depends on its pods; and the violating pod is reported by the API server itself, on the
// label write (Pod Security admission's check of existing pods). Only the per-namespace seccomp
// patch, an opt-in, costs a read: its ConfigMap's name, which the label-selected cache would hide.
func TestFirstReconcileOfANewNamespaceReadsNothingPastTheCache(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	reads := &namespaceReads{}
	restCfg := rest.CopyConfig(env.Base)
	restCfg.WrapTransport = reads.wrap
	mgr, err := ctrl.NewManager(runner.WithWarnings(restCfg), ctrl.Options{Scheme: envtest.NewScheme(), Cache: cacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	c := env.Client

	for _, tc := range []struct {
		ns        string
		seccomp   bool
		wantReads []string
	}{
		{"june", false, nil},
		{"june-seccomp", true, []string{"/api/v1/namespaces/june-seccomp/configmaps/waypoint-seccomp"}},
	} {
		t.Run(tc.ns, func(t *testing.T) {
			cfg := config.Default()
			cfg.Mesh.Waypoint.SeccompPatch = ptrTo(tc.seccomp)
			require.NoError(t, cfg.Validate())
			r, err := newManagedReconciler(mgr, cfg)
			require.NoError(t, err)

			require.NoError(t, c.Create(ctx, ownedNamespace(tc.ns, tc.ns+"@example.com")))
			for _, obj := range []client.Object{
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: tc.ns}},
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "root-shell", Namespace: tc.ns},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sh", Image: "busybox",
						SecurityContext: &corev1.SecurityContext{Privileged: ptrTo(true)}}}}},
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "notebook-config", Namespace: tc.ns}, Data: map[string]string{"k": "v"}},
			} {
				require.NoError(t, c.Create(ctx, obj))
			}
			createProfile(t, c, tc.ns, tc.ns+"@example.com")
			profile := &profilev1.Profile{}
			require.NoError(t, c.Get(ctx, client.ObjectKey{Name: tc.ns}, profile))

			res := r.Runner.Apply(ctx, profile)
			require.NoError(t, res.Err())
			assert.Equal(t, tc.wantReads, reads.in(tc.ns), "reads past the cache")
			warnings := strings.Join(res.Warnings(), "\n")
			assert.Contains(t, warnings, `existing pods in namespace "`+tc.ns+`" violate the new PodSecurity enforce level "baseline:latest"`)
			assert.Contains(t, warnings, "root-shell: privileged", "the API server names the pod")
			n := &corev1.Namespace{}
			require.NoError(t, c.Get(ctx, client.ObjectKey{Name: tc.ns}, n))
			assert.Equal(t, "ambient", n.Labels["istio.io/dataplane-mode"])
			assert.Equal(t, "baseline", n.Labels["pod-security.kubernetes.io/enforce"])
		})
	}
}
