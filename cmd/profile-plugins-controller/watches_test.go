package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
)

// The manager wiring: a Profile is reconciled through the watch, and a Gateway that becomes
// Programmed reconciles its Profile through the owner reference, well before the 15 s requeue.
func TestManagerWiring(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t).Counted(t)
	const ns = "dave"
	ctx := startManager(t, env.Config, ctrl.Options{}, config.Default(), only(nil, ns))
	h := &harness{t: t, env: env}
	createProfile(t, env.Client, ns, "dave@example.com")
	require.Eventually(t, func() bool {
		n := &corev1.Namespace{}
		return env.Client.Get(ctx, client.ObjectKey{Name: ns}, n) == nil && n.Labels["istio.io/dataplane-mode"] == "ambient"
	}, 10*time.Second, 100*time.Millisecond, "the profile is reconciled through the watch")

	h.programWaypoint(ns)
	require.Eventually(t, func() bool {
		n := &corev1.Namespace{}
		return env.Client.Get(ctx, client.ObjectKey{Name: ns}, n) == nil && n.Labels["istio.io/use-waypoint"] == "waypoint"
	}, 10*time.Second, 100*time.Millisecond, "the Gateway's status change reconciles the profile")
}

// repairWithin is how soon a tampered label must be back: far below the 15 s wait requeue and the
// ten-hour resync, so only a watch event can have brought the Profile back.
const repairWithin = 5 * time.Second

// Someone with rights on a namespace loosens Pod Security or takes it out of ambient. The
// namespace is repaired through the Namespace watch as fast whether the Profile controls it or an
// admin handed it over by its owner annotation, which gives it no controller reference (Owns
// would follow that reference only, and leave the handed-over one open until the resync).
func TestTamperedNamespaceLabelsAreRepairedThroughTheWatch(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t).Counted(t)
	ctx := startManager(t, env.Config, ctrl.Options{}, config.Default(), only(nil, "tamper-handed-over", "tamper-controlled"))
	h := &harness{t: t, env: env}
	c := env.Client

	for _, tc := range []struct {
		name       string
		handedOver bool
	}{
		{name: "handed-over", handedOver: true},
		{name: "controlled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.t = t
			ns := "tamper-" + tc.name
			if tc.handedOver {
				require.NoError(t, c.Create(ctx, ownedNamespace(ns, ns+"@example.com")))
			}
			createProfile(t, c, ns, ns+"@example.com")
			labelled := func(key, value string) func() bool {
				return func() bool {
					n := &corev1.Namespace{}
					return c.Get(ctx, client.ObjectKey{Name: ns}, n) == nil && n.Labels[key] == value
				}
			}
			require.Eventually(t, labelled("istio.io/dataplane-mode", "ambient"), 20*time.Second, 50*time.Millisecond)
			// Programmed: nothing waits, so no requeue is pending and only a watch can repair.
			h.programWaypoint(ns)
			require.Eventually(t, labelled("istio.io/use-waypoint", "waypoint"), 20*time.Second, 50*time.Millisecond)
			require.Equal(t, !tc.handedOver, metav1.GetControllerOf(h.namespace(ns)) != nil,
				"only the namespace the controller created has the Profile as controller")

			tamper := func(edit func(labels map[string]string)) {
				t.Helper()
				n := h.namespace(ns)
				edit(n.Labels)
				require.NoError(t, c.Update(ctx, n, client.FieldOwner("kubectl-edit")))
			}
			tamper(func(l map[string]string) { l[enforceLabel] = "privileged" })
			assert.Eventually(t, labelled(enforceLabel, "baseline"), repairWithin, 50*time.Millisecond,
				"a loosened enforce level is restored")

			tamper(func(l map[string]string) { delete(l, "istio.io/dataplane-mode") })
			assert.Eventually(t, labelled("istio.io/dataplane-mode", "ambient"), repairWithin, 50*time.Millisecond,
				"a removed enrolment label is restored")
		})
	}
}
