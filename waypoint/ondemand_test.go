package waypoint_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func onDemandConfig(t *testing.T) *config.Config {
	return fixture.Config(t, "mesh: {waypoint: {provision: onDemand, idleAfter: 30m, ignoredServices: {matchLabels: {always-on: \"true\"}}}}\n")
}

// slice is an EndpointSlice of Service svc as the EndpointSlice controller writes it, with one
// endpoint, a pod of the namespace, terminating or not, and labels (the Service's).
func slice(svc string, terminating bool, labels map[string]string) discoveryv1.EndpointSlice {
	l := map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	for k, v := range labels {
		l[k] = v
	}
	return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: svc + "-abcde", Namespace: ns, Labels: l},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Terminating: ptr.To(terminating)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: svc + "-0", UID: "pod-uid"}}}}
}

// Only an endpoint the EndpointSlice controller made from a pod of the namespace counts: a slice
// the mirroring controller copied from hand-written Endpoints (of a Service without a selector),
// whatever pod its targetRef names, or any slice another writer made, keeps no waypoint.
func TestOnlyThePodsOfTheNamespaceBehindAServiceCountAsActivity(t *testing.T) {
	cfg := onDemandConfig(t)
	mirrored := slice("external", false, nil)
	mirrored.Labels[discoveryv1.LabelManagedBy] = "endpointslicemirroring-controller.k8s.io"
	unlabelled := slice("handmade", false, nil)
	delete(unlabelled.Labels, discoveryv1.LabelManagedBy)
	noRef := slice("vm", false, nil)
	noRef.Endpoints[0].TargetRef = nil
	node := slice("node", false, nil)
	node.Endpoints[0].TargetRef.Kind = "Node"
	elsewhere := slice("elsewhere", false, nil)
	elsewhere.Endpoints[0].TargetRef.Namespace = "other"
	for _, tc := range []struct {
		name   string
		slice  discoveryv1.EndpointSlice
		counts bool
	}{
		{"a pod behind a Service", slice("notebook", false, nil), true},
		{"a pod behind a Service, reference without namespace", func() discoveryv1.EndpointSlice {
			s := slice("notebook", false, nil)
			s.Endpoints[0].TargetRef.Namespace = ""
			return s
		}(), false},
		{"mirrored from hand-written Endpoints", mirrored, false},
		{"written by another writer", unlabelled, false},
		{"an address without a targetRef", noRef, false},
		{"a targetRef that is not a Pod", node, false},
		{"a pod of another namespace", elsewhere, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := onDemand(t, cfg, t0, nil, []discoveryv1.EndpointSlice{tc.slice})
			assert.Equal(t, tc.counts, wantsGateway(d), "the Gateway is wanted")
			assert.Equal(t, tc.counts, plugin.Serving(&tc.slice), "plugin.Serving")
		})
	}
}

func onDemand(t *testing.T, cfg *config.Config, now time.Time, labels map[string]string, slices []discoveryv1.EndpointSlice, objs ...client.Object) plugin.Desired {
	t.Helper()
	p := waypoint.New(cfg)
	require.True(t, p.NeedsEndpointSlices())
	d, err := p.Generate(plugin.Target{Namespace: ns, Observed: plugin.Observed{Labels: labels, Objects: objs,
		EndpointSlices: slices, Now: now}})
	require.NoError(t, err)
	return d
}

func wantsGateway(d plugin.Desired) bool {
	for _, o := range d.Objects {
		if _, ok := o.(*gatewayv1.Gateway); ok {
			return true
		}
	}
	return false
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

func TestAlwaysNeedsNoEndpointSlices(t *testing.T) {
	assert.False(t, waypoint.New(fixture.Config(t, "")).NeedsEndpointSlices(), "provision always reads no EndpointSlice")
	assert.False(t, waypoint.New(fixture.Config(t, "mesh: {mode: sidecar, waypoint: {provision: onDemand}}\n")).NeedsEndpointSlices(),
		"sidecar mode has no waypoint")
}

func TestAnEndpointActivatesTheWaypointAtOnce(t *testing.T) {
	cfg := onDemandConfig(t)
	d := onDemand(t, cfg, t0, map[string]string{waypoint.IdleSinceLabel: unix(t0.Add(-time.Hour))},
		[]discoveryv1.EndpointSlice{slice("notebook", false, nil)})
	assert.True(t, wantsGateway(d), "an endpoint, ready or not, makes the Gateway wanted")
	assert.NotContains(t, d.Labels, waypoint.IdleSinceLabel, "an active namespace has no idle-since label")
	assert.NotContains(t, d.Labels, "istio.io/use-waypoint", "routed only once Programmed")
	require.NotEmpty(t, d.Waiting)
	assert.Contains(t, d.Waiting[0], waypoint.WaitingForWaypoint+": "+waypoint.Starting)

	d = onDemand(t, cfg, t0, nil, []discoveryv1.EndpointSlice{slice("notebook", false, nil)}, programmed(cfg))
	assert.Equal(t, "waypoint", d.Labels["istio.io/use-waypoint"], "routed once Programmed")
	assert.Empty(t, d.Notes)
	assert.Zero(t, d.RequeueAfter)
}

func TestIdleNamespaceWithoutGatewayCreatesNothing(t *testing.T) {
	cfg := onDemandConfig(t)
	for name, slices := range map[string][]discoveryv1.EndpointSlice{
		"no slice":              nil,
		"terminating endpoints": {slice("notebook", true, nil)},
		"the waypoint's own":    {slice("waypoint", false, map[string]string{"gateway.networking.k8s.io/gateway-name": "waypoint"})},
		"an ignored Service":    {slice("visualization", false, map[string]string{"always-on": "true"})},
	} {
		t.Run(name, func(t *testing.T) {
			d := onDemand(t, cfg, t0, nil, slices)
			assert.False(t, wantsGateway(d), "nothing is made while idle")
			assert.NotContains(t, d.Labels, "istio.io/use-waypoint")
			assert.Equal(t, "ambient", d.Labels["istio.io/dataplane-mode"], "an idle namespace stays enrolled, behind the ztunnel policy")
			assert.Equal(t, unix(t0), d.Labels[waypoint.IdleSinceLabel])
			require.Len(t, d.Notes, 1)
			assert.Contains(t, d.Notes[0], waypoint.Idle+" 2026-12-01T09:00:00Z")
			assert.Empty(t, d.Waiting)
		})
	}
}

func TestIdleWindowKeepsTheRoutedWaypointAndRequeuesAtItsEnd(t *testing.T) {
	cfg := onDemandConfig(t)
	since := t0.Add(-10 * time.Minute)
	routed := map[string]string{waypoint.IdleSinceLabel: unix(since), "istio.io/use-waypoint": "waypoint", "istio.io/ingress-use-waypoint": "true"}
	d := onDemand(t, cfg, t0, routed, nil, programmed(cfg))
	assert.True(t, wantsGateway(d))
	assert.Equal(t, "waypoint", d.Labels["istio.io/use-waypoint"], "inside the window the waypoint keeps serving")
	assert.Equal(t, unix(since), d.Labels[waypoint.IdleSinceLabel], "the idle-since time survives restarts on the label")
	assert.Equal(t, 20*time.Minute, d.RequeueAfter, "requeued at the deadline")
	assert.Empty(t, d.Waiting)

	d = onDemand(t, cfg, t0, nil, nil, programmed(cfg))
	assert.True(t, wantsGateway(d), "an upgrade from always starts the window now")
	assert.Equal(t, unix(t0), d.Labels[waypoint.IdleSinceLabel])
	assert.Equal(t, 30*time.Minute, d.RequeueAfter)
}

func TestDeactivationWithdrawsRoutingInACallBeforeTheDelete(t *testing.T) {
	cfg := onDemandConfig(t)
	since := t0.Add(-31 * time.Minute)
	routed := map[string]string{waypoint.IdleSinceLabel: unix(since), "istio.io/use-waypoint": "waypoint", "istio.io/ingress-use-waypoint": "true"}
	d := onDemand(t, cfg, t0, routed, nil, programmed(cfg))
	assert.True(t, wantsGateway(d), "the Gateway stays while the namespace is observed routed")
	assert.NotContains(t, d.Labels, "istio.io/use-waypoint")
	assert.NotContains(t, d.Labels, "istio.io/ingress-use-waypoint")
	require.Len(t, d.Waiting, 1, "waits for the namespace to be observed without routing")

	unrouted := map[string]string{waypoint.IdleSinceLabel: unix(since)}
	d = onDemand(t, cfg, t0, unrouted, nil, programmed(cfg))
	assert.False(t, wantsGateway(d), "then the Gateway goes")
	assert.Equal(t, unix(since), d.Labels[waypoint.IdleSinceLabel])
	assert.Empty(t, d.Waiting)
}

func TestEndpointsBackInsideTheWindowKeepTheWaypoint(t *testing.T) {
	cfg := onDemandConfig(t)
	idle := map[string]string{waypoint.IdleSinceLabel: unix(t0.Add(-29 * time.Minute)), "istio.io/use-waypoint": "waypoint"}
	d := onDemand(t, cfg, t0, idle, []discoveryv1.EndpointSlice{slice("notebook", false, nil)}, programmed(cfg))
	assert.True(t, wantsGateway(d))
	assert.Equal(t, "waypoint", d.Labels["istio.io/use-waypoint"])
	assert.NotContains(t, d.Labels, waypoint.IdleSinceLabel, "the window is over: the namespace is active again")
}

func TestAGatewayDeletedWhileIdleIsNotRecreatedAndItsRoutingGoes(t *testing.T) {
	cfg := onDemandConfig(t)
	idle := map[string]string{waypoint.IdleSinceLabel: unix(t0.Add(-5 * time.Minute)), "istio.io/use-waypoint": "waypoint"}
	d := onDemand(t, cfg, t0, idle, nil)
	assert.False(t, wantsGateway(d))
	assert.NotContains(t, d.Labels, "istio.io/use-waypoint")
}

func TestUnknownClockKeepsWhatStands(t *testing.T) {
	cfg := onDemandConfig(t)
	d := onDemand(t, cfg, time.Time{}, nil, nil, programmed(cfg))
	assert.True(t, wantsGateway(d), "without a clock no window starts and nothing is removed")
	assert.NotContains(t, d.Labels, waypoint.IdleSinceLabel)
	d = onDemand(t, cfg, time.Time{}, nil, nil)
	assert.False(t, wantsGateway(d), "and nothing is made")
}
