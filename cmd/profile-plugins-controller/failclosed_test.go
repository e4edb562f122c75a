package main

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"

	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// recorder keeps every watch event on the namespace, its policies and its gateways. One etcd
// orders all of them by resourceVersion, so sorting by it replays the states others observed.
type recorder struct {
	mu     sync.Mutex
	events []recorded
}

type recorded struct {
	rv   int64
	kind string
	typ  watch.EventType
	obj  client.Object
}

func (r *recorder) watch(t *testing.T, ctx context.Context, c client.WithWatch, list client.ObjectList, kind string, opts ...client.ListOption) {
	w, err := c.Watch(ctx, list, opts...)
	require.NoError(t, err)
	go func() {
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
			r.mu.Lock()
			r.events = append(r.events, recorded{rv: rv, kind: kind, typ: ev.Type, obj: obj})
			r.mu.Unlock()
		}
	}()
	go func() { <-ctx.Done(); w.Stop() }()
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// settle waits until no event has arrived for a while, so the replay sees them all.
func (r *recorder) settle() {
	last, quiet := r.count(), 0
	for quiet < 5 {
		time.Sleep(100 * time.Millisecond)
		if n := r.count(); n == last {
			quiet++
		} else {
			last, quiet = n, 0
		}
	}
}

// TestFailClosedInvariant replays every state the namespace went through across enrolment, a
// waypoint that becomes Programmed late, sidecar/ambient switches and revoke, and checks each one:
// an ambient namespace has its ztunnel policy, and istio.io/use-waypoint never names a waypoint
// that is missing, not Programmed, or without the owner policy attached.
func TestFailClosedInvariant(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	wc, err := client.NewWithWatch(h.env.Config, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	const ns = "erin"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{}
	rec.watch(t, ctx, wc, &corev1.NamespaceList{}, "Namespace", client.MatchingFields{"metadata.name": ns})
	rec.watch(t, ctx, wc, &istiosecurityv1.AuthorizationPolicyList{}, "AuthorizationPolicy", client.InNamespace(ns))
	rec.watch(t, ctx, wc, &gatewayv1.GatewayList{}, "Gateway", client.InNamespace(ns))

	createProfile(t, h.env.Client, ns, "erin@example.com")
	h.reconcile(ns)
	h.reconcile(ns) // the waypoint is late: nothing may route to it yet
	h.programWaypoint(ns)
	h.reconcile(ns)
	h.configure(config.ModeSidecar)
	h.reconcile(ns)
	h.reconcile(ns)
	h.configure(config.ModeAmbient)
	h.reconcile(ns)
	h.reconcile(ns) // the owner policy moves to the waypoint
	h.reconcile(ns) // the waypoint is made for it
	h.programWaypoint(ns)
	h.reconcile(ns)
	require.NoError(t, h.env.Client.Delete(context.Background(), h.profile(ns)))
	h.reconcile(ns)
	rec.settle()

	rec.mu.Lock()
	events := append([]recorded(nil), rec.events...)
	rec.mu.Unlock()
	sort.SliceStable(events, func(i, j int) bool { return events[i].rv < events[j].rv })
	require.Greater(t, len(events), 20, "the scenario produced the events it should")

	var nsLabels map[string]string
	policies := map[string]*istiosecurityv1.AuthorizationPolicy{}
	gateways := map[string]*gatewayv1.Gateway{}
	states, ambientStates, waypointStates := 0, 0, 0
	for _, ev := range events {
		switch o := ev.obj.(type) {
		case *corev1.Namespace:
			nsLabels = o.Labels
		case *istiosecurityv1.AuthorizationPolicy:
			if ev.typ == watch.Deleted {
				delete(policies, o.Name)
			} else {
				policies[o.Name] = o
			}
		case *gatewayv1.Gateway:
			if ev.typ == watch.Deleted {
				delete(gateways, o.Name)
			} else {
				gateways[o.Name] = o
			}
		}
		states++
		at := func(msg string) string {
			return msg + " at resourceVersion " + strconv.FormatInt(ev.rv, 10) + " after a " + ev.kind + " event"
		}
		if nsLabels["istio.io/dataplane-mode"] == "ambient" {
			ambientStates++
			require.Contains(t, policies, "ns-owner-access-istio-ztunnel", at("ambient namespace without its ztunnel policy"))
		}
		if name, ok := nsLabels["istio.io/use-waypoint"]; ok {
			waypointStates++
			// Before, the owner policy may still apply to the pods (sidecar form) while a switch
			// from sidecar mode waits for the ztunnel policy; nothing may be routed to it then.
			owner, exists := policies["ns-owner-access-istio"]
			require.True(t, exists && len(owner.Spec.TargetRefs) == 1 && owner.Spec.TargetRefs[0].Name == name,
				at("use-waypoint names a waypoint its owner policy is not attached to"))
			gw, exists := gateways[name]
			require.True(t, exists, at("use-waypoint names a missing waypoint"))
			c := meta.FindStatusCondition(gw.Status.Conditions, "Programmed")
			require.True(t, c != nil && c.Status == metav1.ConditionTrue && len(gw.Status.Addresses) > 0, at("use-waypoint names a waypoint that is not Programmed"))
			owner, ok := policies["ns-owner-access-istio"]
			require.True(t, ok && len(owner.Spec.TargetRefs) == 1 && owner.Spec.TargetRefs[0].Name == name,
				at("use-waypoint names a waypoint that the owner policy does not protect"))
		}
	}
	t.Logf("checked %d recorded states: %d in ambient, %d routed through a waypoint", states, ambientStates, waypointStates)
	require.NotZero(t, ambientStates)
	require.NotZero(t, waypointStates)
}
