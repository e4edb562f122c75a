package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/runner"

	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// faulty fails the k-th write it sees (1-based). Some faults happen after the server applied the
// write (a timeout on the way back), the others before.
type faulty struct {
	k, seen  int
	injected string
}

func (f *faulty) next(write func() error) error {
	f.seen++
	if f.seen != f.k {
		return write()
	}
	gr := schema.GroupResource{Resource: "injected"}
	switch f.k % 3 {
	case 0:
		f.injected = "server error"
		return apierrors.NewInternalError(fmt.Errorf("injected fault %d", f.k))
	case 1:
		f.injected = "conflict"
		return apierrors.NewConflict(gr, "x", fmt.Errorf("injected fault %d", f.k))
	default:
		f.injected = "timeout after the write"
		if err := write(); err != nil {
			return err
		}
		return apierrors.NewTimeoutError(fmt.Sprintf("injected fault %d", f.k), 1)
	}
}

func (f *faulty) client(c client.WithWatch) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return f.next(func() error { return c.Apply(ctx, obj, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return f.next(func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return f.next(func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return f.next(func() error { return c.Patch(ctx, obj, p, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return f.next(func() error { return c.Delete(ctx, obj, opts...) })
		},
	})
}

type step struct {
	name string
	mode config.MeshMode
	// before runs fault-free ahead of the step (istiod's part).
	before func(t *testing.T, h *harness, ns string)
}

// TestFaultInjection fails, in turn, every write of every step of the ambient enrolment and the
// switch to sidecar mode, then runs the step again without faults: the namespace must end exactly
// as in a fault-free run, with no orphaned objects and nothing of anyone else's changed.
func TestFaultInjection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	wc, err := client.NewWithWatch(h.env.Config, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	steps := []step{
		{name: "enrol in ambient", mode: config.ModeAmbient},
		{name: "waypoint ready", mode: config.ModeAmbient, before: func(t *testing.T, h *harness, ns string) { h.programWaypoint(ns) }},
		{name: "switch to sidecar", mode: config.ModeSidecar},
		{name: "back to ambient", mode: config.ModeAmbient},
	}
	apply := func(t *testing.T, c client.Client, ns string, mode config.MeshMode) *runner.Result {
		cfg := config.Default()
		cfg.Mesh.Mode = mode
		ps, err := plugins.New(cfg)
		require.NoError(t, err)
		runner, err := runner.NewRunner(c, ps...)
		require.NoError(t, err)
		return runner.Apply(context.Background(), profileFor(ns))
	}
	// settle applies until nothing changes any more: a step may take more than one call (the
	// owner policy moves to the waypoint only once the ztunnel policy was observed in place).
	settle := func(t *testing.T, ns string, mode config.MeshMode) {
		for range 5 {
			res := apply(t, h.env.Client, ns, mode)
			require.NoError(t, res.Err())
			if !res.Changed() {
				return
			}
		}
		t.Fatalf("namespace %s does not settle", ns)
	}
	// runTo brings a fresh namespace through the steps before i, fault-free.
	runTo := func(t *testing.T, ns string, i int) {
		prepareNamespace(t, h.env.Client, ns)
		for _, s := range steps[:i] {
			if s.before != nil {
				s.before(t, h, ns)
			}
			require.NoError(t, apply(t, h.env.Client, ns, s.mode).Err())
		}
		if steps[i].before != nil {
			steps[i].before(t, h, ns)
		}
	}

	injected := 0
	for i, s := range steps {
		// The fault-free reference for this step, and how many writes it makes.
		ref := fmt.Sprintf("fault-ref-%d", i)
		runTo(t, ref, i)
		counter := &faulty{k: -1}
		require.NoError(t, apply(t, counter.client(wc), ref, s.mode).Err())
		settle(t, ref, s.mode)
		want := snapshot(t, h.env.Client, ref)
		require.NotZero(t, counter.seen, "step %q writes something", s.name)

		for k := 1; k <= counter.seen; k++ {
			ns := fmt.Sprintf("fault-%d-%d", i, k)
			runTo(t, ns, i)
			f := &faulty{k: k}
			res := apply(t, f.client(wc), ns, s.mode)
			require.NotEmpty(t, f.injected, "step %q: write %d was reached", s.name, k)
			require.Error(t, res.Err(), "step %q: the %s at write %d is reported", s.name, f.injected, k)
			require.True(t, res.Retryable(), "an API fault is worth retrying")
			injected++

			require.NoError(t, apply(t, h.env.Client, ns, s.mode).Err(), "step %q: the retry after the %s at write %d", s.name, f.injected, k)
			settle(t, ns, s.mode)
			require.Equal(t, want, snapshot(t, h.env.Client, ns), "step %q: state after the %s at write %d and a retry", s.name, f.injected, k)
		}
	}
	t.Logf("injected %d faults over %d steps; every retry converged to the fault-free state", injected, len(steps))
}

var hashValue = regexp.MustCompile(`"(` + regexp.QuoteMeta(plugin.DesiredHashAnnotation) + `)":"[0-9a-f]+"`)

func profileFor(ns string) *profilev1.Profile {
	return &profilev1.Profile{
		ObjectMeta: metav1.ObjectMeta{Name: ns, UID: types.UID("uid-" + ns)},
		Spec:       profilev1.ProfileSpec{Owner: fixture.User(ns + "@example.com")},
	}
}

// prepareNamespace creates the namespace with what other writers put there: a label and a
// ConfigMap the plugins must never touch.
func prepareNamespace(t *testing.T, c client.Client, ns string) {
	t.Helper()
	require.NoError(t, c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": "ml"},
		Annotations: map[string]string{ownership.OwnerAnnotation: ns + "@example.com"}}}))
	require.NoError(t, c.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "notes", Namespace: ns}, Data: map[string]string{"a": "b"},
	}))
}

// snapshot is everything in the namespace that the plugins or others could have written, with the
// namespace's name replaced so two namespaces compare.
func snapshot(t *testing.T, c client.Client, ns string) string {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Namespace{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: ns}, n))
	out := map[string]any{"labels": n.Labels}
	lists := map[string]client.ObjectList{
		"AuthorizationPolicy": &istiosecurityv1.AuthorizationPolicyList{},
		"Gateway":             &gatewayv1.GatewayList{},
		"ConfigMap":           &corev1.ConfigMapList{},
	}
	for kind, l := range lists {
		require.NoError(t, c.List(ctx, l, client.InNamespace(ns)))
		items := map[string]any{}
		switch l := l.(type) {
		case *istiosecurityv1.AuthorizationPolicyList:
			for _, o := range l.Items {
				items[o.Name] = []any{o.Labels, o.Annotations, &o.Spec}
			}
		case *gatewayv1.GatewayList:
			for _, o := range l.Items {
				items[o.Name] = []any{o.Labels, o.Annotations, o.Spec}
			}
		case *corev1.ConfigMapList:
			for _, o := range l.Items {
				items[o.Name] = []any{o.Labels, o.Annotations, o.Data}
			}
		}
		out[kind] = items
	}
	data, err := json.Marshal(out)
	require.NoError(t, err)
	// The desired-hash covers the namespace's name and the Profile's UID, so it differs by design.
	return hashValue.ReplaceAllString(strings.ReplaceAll(string(data), ns, "NAMESPACE"), `"$1":"HASH"`)
}
