package platform

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// This file checks, with mesh.waypoint.provision onDemand, that idleAfter outlasts a waypoint's start.

// checkIdleAfter compares idleAfter with the time the plugins' waypoints in the cluster took to
// become Programmed: from the Gateway's creation to the last transition of its Programmed
// condition to True, for the Gateways Programmed at their generation. That is what it can tell:
// a waypoint that flapped since reads longer than it took, and with no Programmed waypoint
// (every namespace idle, or a new cluster) there is nothing to compare, and no finding.
func checkIdleAfter(ctx context.Context, r client.Reader, cfg *config.Config) ([]Finding, error) {
	if !cfg.Mesh.OnDemand() {
		return nil, nil
	}
	list := &gatewayv1.GatewayList{}
	if err := r.List(ctx, list, client.MatchingLabels{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: waypoint.PluginName}); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil // no Gateway API: checkWaypoint and the runner report what that means
		}
		return nil, fmt.Errorf("listing the plugins' waypoint Gateways: %w", err)
	}
	idleAfter := cfg.Mesh.Waypoint.IdleAfterDuration()
	var slowest time.Duration
	var where string
	for i := range list.Items {
		gw := &list.Items[i]
		c := meta.FindStatusCondition(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != gw.Generation || c.LastTransitionTime.IsZero() {
			continue
		}
		if took := c.LastTransitionTime.Sub(gw.CreationTimestamp.Time); took > slowest {
			slowest, where = took, gw.Namespace
		}
	}
	if slowest <= idleAfter {
		return nil, nil
	}
	return []Finding{{Kind: FindingIdleAfterShorterThanStart, What: WhatWaypoint, Namespace: where,
		Problem: fmt.Sprintf("mesh.waypoint.idleAfter is %s, but the waypoint of namespace %s took %s from its Gateway's creation to Programmed: "+
			"a namespace whose workload comes and goes within that time can lose its waypoint before it ever served, "+
			"and its users wait for a new one each time", idleAfter, where, slowest.Round(time.Second)),
		Fix: fmt.Sprintf("set mesh.waypoint.idleAfter well above %s, or find why the waypoint starts slowly "+
			"(`kubectl -n %s describe gateway %s`, the events of its Deployment)", slowest.Round(time.Second), where, cfg.Mesh.Waypoint.Name)}}, nil
}
