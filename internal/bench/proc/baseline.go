package proc

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"

	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// baselineManager is the profiles controller's manager: default cache options, as its main.go
// builds it (kubeflow/dashboard components/profile-controller/main.go, ctrl.NewManager with
// Scheme, metrics, probes and leader election only).
func baselineManager(cfg *rest.Config) (manager.Manager, error) {
	return ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  newScheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
}

// baselineWatches are the informers the profiles controller opens, all of full objects and
// cluster-wide (kubeflow/dashboard components/profile-controller/controllers/profile_controller.go):
// SetupWithManager's For(Profile), Owns(Namespace), Owns(AuthorizationPolicy), Owns(ServiceAccount)
// and Owns(RoleBinding); and the cached Gets of Reconcile, each of which opens an informer too:
// the waypoint Gateway (createWaypoint, ambient mode) and the ResourceQuota (read when a Profile
// sets no quota). The controller watches AuthorizationPolicies as security/v1beta1, the plugins'
// type is v1: the same resource, so the same objects in the cache. A kind the baseline writes
// beyond these (the waypoint's seccomp ConfigMap, when a configuration opts in to it) is read
// through the same cached client, which opens its informer on first use: the controller's pattern.
func baselineWatches() []client.Object {
	return []client.Object{&profilev1.Profile{}, &corev1.Namespace{}, &istiosecurityv1.AuthorizationPolicy{},
		&corev1.ServiceAccount{}, &rbacv1.RoleBinding{}, &gatewayv1.Gateway{}, &corev1.ResourceQuota{}}
}

// baseline is the profiles controller's pattern for the objects the plugins want: cached Get,
// Create when missing, compare the fields it sets and Update when they differ; the same for the
// namespace's labels (one Update).
type baseline struct {
	client  client.Client
	scheme  *runtime.Scheme
	track   *tracker
	mu      sync.Mutex
	plugins map[*config.Config][]plugin.Plugin
}

func startBaseline(ctx context.Context, cfg *rest.Config) (*baseline, error) {
	mgr, err := baselineManager(cfg)
	if err != nil {
		return nil, err
	}
	if err := startManager(ctx, mgr, baselineWatches()); err != nil {
		return nil, err
	}
	track := newTracker(mgr.GetScheme())
	return &baseline{client: track.wrap(withWatch{mgr.GetClient()}), scheme: mgr.GetScheme(), track: track,
		plugins: map[*config.Config][]plugin.Plugin{}}, nil
}

func (b *baseline) settle(ctx context.Context) error { return b.track.wait(ctx, b.client) }

func (b *baseline) reconcile(ctx context.Context, cfg *config.Config, ns string) error {
	objs, labels, err := b.desired(cfg, ns)
	if err != nil {
		return err
	}
	for _, want := range objs {
		if err := b.createOrUpdate(ctx, want); err != nil {
			return err
		}
	}
	n := &corev1.Namespace{}
	if err := b.client.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		return err
	}
	changed := false
	for k, v := range labels {
		if cur, ok := n.Labels[k]; !ok || cur != v {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[k] = v
			changed = true
		}
	}
	if changed {
		return b.client.Update(ctx, n)
	}
	return nil
}

func (b *baseline) createOrUpdate(ctx context.Context, want client.Object) error {
	found := want.DeepCopyObject().(client.Object)
	err := b.client.Get(ctx, client.ObjectKeyFromObject(want), found)
	if apierrors.IsNotFound(err) {
		return b.client.Create(ctx, want.DeepCopyObject().(client.Object))
	}
	if err != nil {
		return err
	}
	if same(found, want) {
		return nil
	}
	update := want.DeepCopyObject().(client.Object)
	update.SetResourceVersion(found.GetResourceVersion())
	return b.client.Update(ctx, update)
}

// desired is what the plugins render for ns (owner references included) as typed objects, and the
// namespace labels they want.
func (b *baseline) desired(cfg *config.Config, ns string) ([]client.Object, map[string]string, error) {
	ps, err := b.pluginsFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	p := profileOf(ns)
	r, err := runner.Render(b.scheme, ps, plugin.Target{Namespace: ns, Owner: p.Spec.Owner.Name, Profile: p})
	if err != nil {
		return nil, nil, err
	}
	objs := make([]client.Object, 0, len(r.Objects))
	for _, u := range r.Objects {
		typed, err := b.scheme.New(u.GroupVersionKind())
		if err != nil {
			return nil, nil, err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return nil, nil, err
		}
		objs = append(objs, typed.(client.Object))
	}
	return objs, r.Namespace.GetLabels(), nil
}

func (b *baseline) pluginsFor(cfg *config.Config) ([]plugin.Plugin, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ps, ok := b.plugins[cfg]; ok {
		return ps, nil
	}
	ps, err := profileplugins.New(cfg)
	if err == nil {
		b.plugins[cfg] = ps
	}
	return ps, err
}

// same compares what the controller sets: labels, annotations and the spec (or data), each as a
// subset, since the API server adds defaults.
func same(found, want client.Object) bool {
	f, w := jsonMap(found), jsonMap(want)
	for _, key := range []string{"spec", "data"} {
		if !subset(f[key], w[key]) {
			return false
		}
	}
	fm, _ := f["metadata"].(map[string]any)
	wm, _ := w["metadata"].(map[string]any)
	return subset(fm["labels"], wm["labels"]) && subset(fm["annotations"], wm["annotations"])
}

func jsonMap(o any) map[string]any {
	data, _ := json.Marshal(o)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return m
}

func subset(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return len(w) == 0
		}
		for k, v := range w {
			if !subset(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !subset(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}
