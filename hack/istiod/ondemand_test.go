package istiod

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The switch from always to onDemand with the real istiod, then activation and teardown: a
// namespace without endpoints loses its routing and its Gateway after idleAfter (the stand-in, as
// garbage collector, removes istiod's objects), keeps its ztunnel policy at ztunnel while idle, and
// gets a waypoint back, deployed and Programmed by istiod, once a workload's endpoint appears.
func TestOnDemandActivatesAndTearsDownTheWaypointIstiodDeploys(t *testing.T) {
	w := start(t, pluginConfig("provision: always"))
	const ns = "ondemand-olga"
	w.profile(ns)
	w.programmedGateway(ns)
	w.routed(ns)

	w.reconfigure(pluginConfig("provision: onDemand\nidleAfter: 1m"))
	w.idle(ns)
	w.ztunnelPolicy(ns, "idle")

	pod := w.workload(ns, "notebook")
	w.deployedByIstiod(ns, nil)
	w.programmedGateway(ns)
	w.routed(ns)
	w.ztunnelPolicy(ns, "active again")

	must(t, w.c.Delete(t.Context(), pod, client.GracePeriodSeconds(0)), "deleting the workload")
	w.idle(ns)
}

// idle waits until ns is unrouted, its Gateway gone and, by the stand-in's garbage collection,
// istiod's Deployment with it.
func (w *world) idle(ns string) {
	w.t.Helper()
	w.unrouted(ns)
	w.eventually(ns+" idle: Gateway and waypoint Deployment gone", func() (bool, string) {
		gwErr := w.get(&gatewayv1.Gateway{}, ns, waypoint)
		depErr := w.get(&appsv1.Deployment{}, ns, waypoint)
		return gone(gwErr) && gone(depErr), fmt.Sprintf("Gateway: %v, Deployment: %v", gwErr, depErr)
	})
}
