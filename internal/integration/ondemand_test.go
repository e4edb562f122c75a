package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// onDemandNS is one namespace with provision onDemand on the real API server, its runners on a
// clock the test moves, every write checked for fail-open states (upgrade.check) and, beyond that,
// for routing to a waypoint that is not Programmed at its generation.
type onDemandNS struct {
	*upgrade
	cfg   *config.Config
	clock time.Time
}

func startOnDemand(t *testing.T, ns string) *onDemandNS {
	o := &onDemandNS{upgrade: startUpgrade(t, ns), clock: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC),
		cfg: fixture.Config(t, "mesh: {waypoint: {provision: onDemand, idleAfter: 30m}}\n")}
	o.now = func() time.Time { return o.clock }
	return o
}

// endpoint sets Service svc's EndpointSlice to n endpoints, not ready (a pod that starts), as the
// EndpointSlice controller would; n = 0 keeps the slice without endpoints (the notebook culled).
func (o *onDemandNS) endpoint(svc string, n int) {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: svc + "-x1", Namespace: o.ns,
		Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4}
	for i := 0; i < n; i++ {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.1.0." + string(rune('1'+i))},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: o.ns, Name: svc + "-" + string(rune('0'+i))}})
	}
	o.write(es)
}

// write creates es, or updates its endpoints.
func (o *onDemandNS) write(es *discoveryv1.EndpointSlice) {
	cur := &discoveryv1.EndpointSlice{}
	err := o.base.Get(o.ctx, client.ObjectKeyFromObject(es), cur)
	if apierrors.IsNotFound(err) {
		require.NoError(o.t, o.base.Create(o.ctx, es))
		return
	}
	require.NoError(o.t, err)
	cur.Endpoints = es.Endpoints
	require.NoError(o.t, o.base.Update(o.ctx, cur))
}

// run converges, then checks the state it left: routed only to a Programmed waypoint, and the
// ztunnel, owner policy and dataplane-mode in place whatever the activity.
func (o *onDemandNS) run(when string) state {
	o.converge(o.cfg)
	s := o.snapshot(when)
	o.routedOnlyToProgrammed(s)
	assert.Equal(o.t, "ambient", s.labels["istio.io/dataplane-mode"], "%s: dataplane-mode stays", when)
	assert.True(o.t, ztunnelIntact(s.ztunnel, o.ns), "%s: the ztunnel policy stays", when)
	assert.NotNil(o.t, s.owner, "%s: the owner policy stays", when)
	return s
}

func (o *onDemandNS) routedOnlyToProgrammed(s state) {
	if s.labels["istio.io/use-waypoint"] == "" && s.labels["istio.io/ingress-use-waypoint"] == "" {
		return
	}
	require.NotNil(o.t, s.gateway, "%s: routed without a waypoint", s.when)
	c := meta(s.gateway)
	assert.True(o.t, c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == s.gateway.Generation,
		"%s: routed to a waypoint not Programmed at its generation", s.when)
}

// writesSince are the writes after the first n.
func (o *onDemandNS) writesSince(n int) []string { return append([]string(nil), o.writes[n:]...) }

func (o *onDemandNS) gatewayDeletes(from int) int {
	n := 0
	for _, w := range o.writesSince(from) {
		if w == "delete Gateway/waypoint" {
			n++
		}
	}
	return n
}

// Activation and deactivation: an idle namespace gets no Gateway; an endpoint, not ready yet,
// makes it at once, routed once Programmed; the endpoint gone, the waypoint stays for idleAfter,
// and the controller is asked back at the deadline; then routing comes off in one call and the
// Gateway goes in a later one.
func TestOnDemandActivatesAndDeactivates(t *testing.T) {
	t.Parallel()
	o := startOnDemand(t, "ondemand-cycle")
	s := o.run("new, idle")
	assert.Nil(t, s.gateway, "an idle namespace has no waypoint")
	assert.NotContains(t, s.labels, "istio.io/use-waypoint")
	assert.Equal(t, strconv.FormatInt(o.clock.Unix(), 10), s.labels[waypoint.IdleSinceLabel])
	assert.Contains(t, kubeflow.Condition(o.last).Message, waypoint.Idle+" 2026-12-01T09:00:00Z")

	o.endpoint("notebook", 1)
	mark := len(o.writes)
	s = o.run("active")
	require.NotNil(t, s.gateway, "an endpoint makes the waypoint")
	assert.Equal(t, "waypoint", s.labels["istio.io/use-waypoint"])
	assert.NotContains(t, s.labels, waypoint.IdleSinceLabel)
	o.assertOrder("apply Gateway/waypoint", "apply labels of Namespace/"+o.ns)
	assert.Equal(t, "apply Gateway/waypoint", o.writesSince(mark)[0], "the Gateway is the first write: %v", o.writesSince(mark))

	o.endpoint("notebook", 0)
	o.clock = o.clock.Add(time.Minute)
	s = o.run("idle, inside the window")
	require.NotNil(t, s.gateway, "kept for idleAfter")
	assert.Equal(t, "waypoint", s.labels["istio.io/use-waypoint"], "and still routed")
	assert.Equal(t, strconv.FormatInt(o.clock.Unix(), 10), s.labels[waypoint.IdleSinceLabel], "idle since the endpoint went")
	assert.Equal(t, 30*time.Minute, o.last.RequeueAfter(), "the controller comes back at the deadline")

	o.clock = o.clock.Add(30 * time.Minute)
	mark = len(o.writes)
	s = o.run("idle past the window")
	assert.Nil(t, s.gateway, "the waypoint is deleted after idleAfter")
	assert.NotContains(t, s.labels, "istio.io/use-waypoint")
	assert.NotContains(t, s.labels, "istio.io/ingress-use-waypoint")
	w := o.writesSince(mark)
	require.Equal(t, []string{"apply labels of Namespace/" + o.ns, "delete Gateway/waypoint"}, w, "routing off first, then the delete")
	assert.Zero(t, o.last.RequeueAfter())

	// A restart while idle creates nothing and writes nothing.
	mark = len(o.writes)
	o.clock = o.clock.Add(time.Hour)
	s = o.run("restart while idle")
	assert.Nil(t, s.gateway)
	assert.Empty(t, o.writesSince(mark), "a restart while idle writes nothing")
}

// A Service without a selector whose hand-written Endpoints name a pod that does not exist: the
// mirroring controller copies them into an EndpointSlice labelled
// endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io (kubernetes
// pkg/controller/endpointslicemirroring/utils.go newEndpointSlice; no kube-controller-manager runs
// here, so the test writes it as it would). It is no activity: an idle namespace gets no Gateway
// for it, and a waypoint made for a notebook still goes idleAfter after the notebook's endpoint.
func TestOnDemandEndpointsNoPodBacksKeepNoWaypoint(t *testing.T) {
	t.Parallel()
	o := startOnDemand(t, "ondemand-mirrored")
	o.write(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "external-x1", Namespace: o.ns,
		Labels: map[string]string{discoveryv1.LabelServiceName: "external", discoveryv1.LabelManagedBy: "endpointslicemirroring-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.9.9"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: o.ns, Name: "no-such-pod"}}}})
	s := o.run("only a mirrored endpoint")
	assert.Nil(t, s.gateway, "an endpoint no pod backs makes no waypoint")
	assert.NotContains(t, s.labels, "istio.io/use-waypoint")

	o.endpoint("notebook", 1)
	s = o.run("a notebook starts")
	require.NotNil(t, s.gateway, "a pod's endpoint makes the waypoint")
	o.endpoint("notebook", 0)
	o.clock = o.clock.Add(time.Minute)
	s = o.run("the notebook culled")
	require.NotNil(t, s.gateway, "kept for idleAfter")
	o.clock = o.clock.Add(31 * time.Minute)
	s = o.run("past the window, the mirrored endpoint still there")
	assert.Nil(t, s.gateway, "the mirrored endpoint keeps no waypoint past idleAfter")
	assert.NotContains(t, s.labels, "istio.io/use-waypoint")
}

// Endpoints that come back inside the window keep the waypoint: it is never deleted, routing
// never comes off, and a restart in the window keeps the window's start.
func TestOnDemandFlapWindowKeepsTheWaypoint(t *testing.T) {
	t.Parallel()
	o := startOnDemand(t, "ondemand-flap")
	o.endpoint("notebook", 2)
	o.run("active")
	mark := len(o.writes)
	for i := 0; i < 3; i++ {
		o.endpoint("notebook", 0)
		o.clock = o.clock.Add(20 * time.Minute)
		s := o.run("gone for a while")
		require.NotNil(t, s.gateway)
		assert.Equal(t, "waypoint", s.labels["istio.io/use-waypoint"])
		// Another restart inside the window: the idle-since label carries the window's start.
		o.clock = o.clock.Add(5 * time.Minute)
		s = o.run("restart inside the window")
		require.NotNil(t, s.gateway)
		o.endpoint("notebook", 1)
		s = o.run("back inside the window")
		require.NotNil(t, s.gateway)
		assert.NotContains(t, s.labels, waypoint.IdleSinceLabel)
	}
	assert.Zero(t, o.gatewayDeletes(mark), "never deleted: %v", o.writesSince(mark))
	for _, w := range o.writesSince(mark) {
		assert.False(t, strings.HasPrefix(w, "apply Gateway"), "the Gateway is never rewritten by the flaps: %v", o.writesSince(mark))
	}
	// A restart while active writes nothing.
	mark = len(o.writes)
	o.clock = o.clock.Add(2 * time.Hour)
	s := o.run("restart while active")
	require.NotNil(t, s.gateway)
	assert.Empty(t, o.writesSince(mark))
}

// An install switched from always to onDemand tears the waypoints of idle namespaces down after
// idleAfter, never routing to a missing one, and keeps those of active namespaces.
func TestOnDemandUpgradeFromAlways(t *testing.T) {
	t.Parallel()
	o := startOnDemand(t, "ondemand-upgrade")
	busy := startOnDemand(t, "ondemand-upgrade-busy")
	for _, n := range []*onDemandNS{o, busy} {
		n.converge(config.Default())
		s := n.snapshot("always")
		require.NotNil(t, s.gateway)
		require.Equal(t, "waypoint", s.labels["istio.io/use-waypoint"])
	}
	busy.endpoint("server", 1)

	s := o.run("switched, idle")
	require.NotNil(t, s.gateway, "the window starts at the switch")
	assert.Equal(t, "waypoint", s.labels["istio.io/use-waypoint"])
	s = busy.run("switched, active")
	require.NotNil(t, s.gateway)
	assert.NotContains(t, s.labels, waypoint.IdleSinceLabel)

	o.clock = o.clock.Add(31 * time.Minute)
	busy.clock = busy.clock.Add(31 * time.Minute)
	s = o.run("past the window")
	assert.Nil(t, s.gateway, "the idle namespace's waypoint is torn down")
	o.assertOrder("apply labels of Namespace/"+o.ns, "delete Gateway/waypoint")
	s = busy.run("past the window, active")
	require.NotNil(t, s.gateway, "the active namespace keeps it")
	assert.Equal(t, "waypoint", s.labels["istio.io/use-waypoint"])

	// And back to always: the waypoint returns, the idle-since label goes.
	o.converge(config.Default())
	s = o.snapshot("back to always")
	require.NotNil(t, s.gateway)
	assert.NotContains(t, s.labels, waypoint.IdleSinceLabel)
}

// A Gateway deleted while idle (inside the window) takes its routing with it and is not made
// again until an endpoint appears.
func TestOnDemandGatewayDeletedWhileIdle(t *testing.T) {
	t.Parallel()
	o := startOnDemand(t, "ondemand-deleted")
	o.endpoint("notebook", 1)
	o.run("active")
	o.endpoint("notebook", 0)
	o.run("idle")
	gw := &gatewayv1.Gateway{}
	require.NoError(t, o.base.Get(o.ctx, client.ObjectKey{Namespace: o.ns, Name: "waypoint"}, gw))
	require.NoError(t, o.base.Delete(o.ctx, gw))
	s := o.run("deleted while idle")
	assert.Nil(t, s.gateway, "not made again while idle")
	assert.NotContains(t, s.labels, "istio.io/use-waypoint")
	o.endpoint("notebook", 1)
	s = o.run("active again")
	require.NotNil(t, s.gateway)
	assert.Equal(t, "waypoint", s.labels["istio.io/use-waypoint"])
}
