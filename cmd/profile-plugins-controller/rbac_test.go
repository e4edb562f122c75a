package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// rbacUser is who the controller runs as in TestRoleIsEnough: bound to deploy/rbac/role.yaml only,
// under the name of the deployment's ServiceAccount, which the admission guard trusts.
const rbacUser = "system:serviceaccount:kubeflow:profile-plugins"

// applyRoles applies every object of deploy/rbac/role.yaml, exactly as written (with force: an
// overlay test on the same server may have applied an earlier build's roles of the same names),
// and binds each role to rbacUser.
func applyRoles(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeflow"}})))
	f, err := os.Open(filepath.Join(golden.ModuleRoot(t), "deploy", "rbac", "role.yaml"))
	require.NoError(t, err)
	defer f.Close()
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: rbacUser}}
	roles := 0
	for _, u := range decodeAll(t, f) {
		require.NoError(t, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("role-test"), client.ForceOwnership),
			"%s %s", u.GetKind(), u.GetName())
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: u.GetKind(), Name: u.GetName()}
		meta := metav1.ObjectMeta{Name: u.GetName() + "-test", Namespace: u.GetNamespace()}
		var binding client.Object = &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subject}
		if u.GetKind() == "Role" {
			binding = &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subject}
		}
		require.NoError(t, client.IgnoreAlreadyExists(c.Create(ctx, binding)))
		roles++
	}
	require.Equal(t, 3, roles, "the plugins' ClusterRole, the controller's, and the leader-election Role")
}

// writeCounter counts the requests that can change state, except leader election's lease renewals.
type writeCounter struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet && !strings.Contains(r.URL.Path, "/leases/") {
			w.mu.Lock()
			w.writes = append(w.writes, r.Method+" "+r.URL.Path)
			w.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (w *writeCounter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.writes)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The reference controller, running as a user that has only deploy/rbac/role.yaml (with leader
// election), applies a Profile, enrols its namespace, reaches a steady state that writes nothing,
// and revokes everything on deletion. Any rule missing from the role shows up as a forbidden
// request the controller cannot converge past.
func TestRoleIsEnough(t *testing.T) {
	env := oneAtATime(t, installServer)
	admin := env.Client
	applyRoles(t, admin)

	as := rest.CopyConfig(env.Base)
	as.Impersonate = rest.ImpersonationConfig{UserName: rbacUser}
	counter := &writeCounter{}
	as.WrapTransport = counter.wrap
	limited, err := client.New(as, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	err = limited.List(context.Background(), &corev1.SecretList{})
	require.True(t, apierrors.IsForbidden(err), "the API server enforces RBAC for this user: %v", err)

	const ns = "rbac-erin"
	ctx := startManager(t, as, ctrl.Options{
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        "profile-plugins-rbac-test",
		LeaderElectionNamespace: "kubeflow",
	}, config.Default(), only(nil, ns))
	h := &harness{t: t, env: env}
	createProfile(t, admin, ns, "erin@example.com")
	labelled := func(key, value string) func() bool {
		return func() bool {
			n := &corev1.Namespace{}
			return admin.Get(ctx, client.ObjectKey{Name: ns}, n) == nil && n.Labels[key] == value
		}
	}
	require.Eventually(t, labelled("istio.io/dataplane-mode", "ambient"), 20*time.Second, 100*time.Millisecond,
		"the namespace is created, its policies applied and it is enrolled")
	h.programWaypoint(ns)
	require.Eventually(t, labelled("istio.io/use-waypoint", "waypoint"), 20*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool {
		c := h.profile(ns).Status.Conditions
		return len(c) == 1 && c[0].Status == "True"
	}, 20*time.Second, 100*time.Millisecond, "the status condition is written")

	// Steady state: a resync of the Profile writes nothing. First let the writes of the
	// reconciles already queued land, so a slow machine does not count them as the resync's.
	require.Eventually(t, func() bool {
		n := counter.count()
		time.Sleep(time.Second)
		return n == counter.count()
	}, 20*time.Second, 10*time.Millisecond, "the controller settles")
	before := counter.count()
	p := h.profile(ns)
	p.Annotations = map[string]string{"touched": "yes"}
	require.NoError(t, admin.Update(ctx, p))
	time.Sleep(2 * time.Second)
	assert.Equal(t, before, counter.count(), "a reconcile with nothing to do writes nothing: %v", counter.writes)

	// A refused Profile edit is an error event on the Profile (events.k8s.io).
	p = h.profile(ns)
	p.Spec.Plugins = []profilev1.Plugin{{TypeMeta: metav1.TypeMeta{Kind: "PodSecurity"},
		Spec: &runtime.RawExtension{Raw: []byte(`{"enforce":"privileged"}`)}}}
	require.NoError(t, admin.Update(ctx, p))
	require.Eventually(t, func() bool {
		list := &eventsv1.EventList{}
		require.NoError(t, admin.List(ctx, list))
		for _, e := range list.Items {
			if e.Regarding.Name == ns && e.Reason == "PluginError" {
				return true
			}
		}
		return false
	}, 20*time.Second, 100*time.Millisecond, "the controller may record events")

	require.NoError(t, admin.Delete(ctx, h.profile(ns)))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Name: ns}, &profilev1.Profile{}))
	}, 20*time.Second, 100*time.Millisecond, "the finalizer revokes everything and lets the Profile go")
	assert.False(t, labelled("istio.io/dataplane-mode", "ambient")(), "enrolment withdrawn")
}
