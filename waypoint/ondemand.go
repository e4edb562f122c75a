package waypoint

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"istio.io/api/label"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// IdleSinceLabel records on a namespace with mesh.waypoint.provision onDemand when it last had no
// Service endpoint, in Unix seconds: the plugin sets it when the last endpoint goes and removes it
// when one comes back, and reads it to know, across controller restarts, when the idle window
// ends. A label, not an annotation: it goes out in the runner's one namespace-label write (no
// second write), and `kubectl get ns -l profile-plugins.kubeflow-ambient.io/waypoint-idle-since`
// lists the idle namespaces. Nothing safe depends on it: it only decides how long an unused
// waypoint is kept, and another writer's value can only keep one longer or remove it sooner.
const IdleSinceLabel = "profile-plugins.kubeflow-ambient.io/waypoint-idle-since"

// Idle and Starting begin the Notes and Waiting messages of an onDemand namespace, so that
// controllers can count idle and starting waypoints.
const (
	Idle     = "waypoint idle since"
	Starting = "waypoint starting"
)

// NeedsEndpointSlices implements plugin.EndpointObserver: with provision onDemand the waypoint
// exists only while the namespace serves something.
func (p *Plugin) NeedsEndpointSlices() bool { return p.cfg.Mesh.OnDemand() }

// EndpointSliceLabels implements plugin.EndpointObserver: serving reads the Service's name, the
// Gateway's name and the keys mesh.waypoint.ignoredServices selects on, so a cache that trims
// EndpointSlices keeps these and no other label of the Service's.
func (p *Plugin) EndpointSliceLabels() []string {
	keys := []string{discoveryv1.LabelServiceName, label.IoK8sNetworkingGatewayGatewayName.Name}
	reqs, _ := p.cfg.Mesh.Waypoint.IgnoredServicesSelector().Requirements()
	for _, r := range reqs {
		if !slices.Contains(keys, r.Key()) {
			keys = append(keys, r.Key())
		}
	}
	return keys
}

// demand is what provisioning on demand allows in one call.
type demand struct {
	// gateway: the Gateway is wanted; route: the routing labels may be set once it is ready.
	gateway, route bool
	// idleSince is the IdleSinceLabel value to keep; "" when the namespace is active.
	idleSince string
	// active: a Service endpoint counts, so a Gateway not ready yet is starting.
	active        bool
	note, waiting string
	requeue       time.Duration
}

// demand decides provisioning for t. Activation: a counting endpoint makes the Gateway wanted at
// once (created under the same CreateRequires as always) and routed once Programmed. Without one,
// a Gateway of the plugin's is kept, and routed, for idleAfter from the idle-since time, so that
// endpoints that come back within the window find it; after that the routing labels come off in
// one call and the Gateway is deleted only in a later call that observes the namespace without
// them, so nothing is ever routed to a Gateway being deleted. With no Gateway of the plugin's and
// no endpoint, nothing is made: a restart while idle creates nothing.
func (p *Plugin) demand(t plugin.Target, gwName string) demand {
	if !p.cfg.Mesh.OnDemand() {
		return demand{gateway: true, route: true}
	}
	if p.serving(t.Observed.EndpointSlices, gwName) {
		return demand{gateway: true, route: true, active: true}
	}
	obs := t.Observed
	cur, exists := plugin.Lookup[*gatewayv1.Gateway](obs, gwName)
	exists = exists && plugin.IsManagedBy(cur.Labels, PluginName)
	since, ok := parseIdleSince(obs.Labels[IdleSinceLabel])
	if !ok {
		if obs.Now.IsZero() {
			// No clock: keep what stands, and start no window.
			return demand{gateway: exists, route: true}
		}
		since = obs.Now.Truncate(time.Second)
	}
	d := demand{idleSince: strconv.FormatInt(since.Unix(), 10)}
	at := since.UTC().Format(time.RFC3339)
	deadline := since.Add(p.cfg.Mesh.Waypoint.IdleAfterDuration())
	routed := obs.Labels[label.IoIstioUseWaypoint.Name] != "" || obs.Labels[label.IoIstioIngressUseWaypoint.Name] != ""
	switch {
	case !exists:
		d.note = fmt.Sprintf("%s %s: no Service endpoint in namespace %s, so no waypoint runs; the ztunnel policy keeps it closed, "+
			"and Gateway %s is made as soon as an endpoint appears", Idle, at, t.Namespace, gwName)
	case obs.Now.IsZero() || obs.Now.Before(deadline):
		d.gateway, d.route = true, true
		d.note = fmt.Sprintf("%s %s: no Service endpoint in namespace %s; Gateway %s is kept until %s (mesh.waypoint.idleAfter) and stays if one appears",
			Idle, at, t.Namespace, gwName, deadline.UTC().Format(time.RFC3339))
		if !obs.Now.IsZero() {
			d.requeue = deadline.Sub(obs.Now)
		}
	case routed:
		d.gateway = true
		d.waiting = fmt.Sprintf("%s %s: routing to Gateway %s/%s withdrawn; the Gateway is deleted once the namespace is observed without %s",
			Idle, at, t.Namespace, gwName, label.IoIstioUseWaypoint.Name)
	default:
		d.note = fmt.Sprintf("%s %s: no Service endpoint in namespace %s for %s (mesh.waypoint.idleAfter), so Gateway %s is deleted; "+
			"the ztunnel policy keeps the namespace closed, and the Gateway is made again as soon as an endpoint appears",
			Idle, at, t.Namespace, p.cfg.Mesh.Waypoint.IdleAfterDuration(), gwName)
	}
	return d
}

// serving says whether an EndpointSlice of the namespace counts as activity: the EndpointSlice
// controller made it and it has an endpoint, a pod of the namespace, that is not terminating
// (plugin.Serving), and it is neither the waypoint's own (istiod names the Service of an
// istio-waypoint Gateway like the Gateway and labels it with the Gateway's name, istio/istio
// pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go; Kubernetes copies Service labels
// onto the slices) nor one of mesh.waypoint.ignoredServices. It reads no label but those of
// EndpointSliceLabels and discoveryv1.LabelManagedBy.
func (p *Plugin) serving(list []discoveryv1.EndpointSlice, gwName string) bool {
	ignored := p.cfg.Mesh.Waypoint.IgnoredServicesSelector()
	for i := range list {
		es := &list[i]
		switch {
		case es.DeletionTimestamp != nil, !plugin.Serving(es):
		case es.Labels[discoveryv1.LabelServiceName] == gwName, es.Labels[label.IoK8sNetworkingGatewayGatewayName.Name] == gwName:
		case ignored.Matches(labels.Set(es.Labels)):
		default:
			return true
		}
	}
	return false
}

// parseIdleSince reads an IdleSinceLabel value.
func parseIdleSince(v string) (time.Time, bool) {
	if v == "" {
		return time.Time{}, false
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil || s <= 0 {
		return time.Time{}, false
	}
	return time.Unix(s, 0), true
}

// recordDemand puts what provisioning decided into d: the idle-since label, the note, the wait
// and the requeue at the idle deadline.
func (p *Plugin) recordDemand(d *plugin.Desired, dm demand) {
	if dm.idleSince != "" {
		d.Labels[IdleSinceLabel] = dm.idleSince
	}
	if dm.note != "" {
		d.Notes = append(d.Notes, dm.note)
	}
	if dm.waiting != "" {
		d.Waiting = append(d.Waiting, dm.waiting)
	}
	d.RequeueAfter = dm.requeue
}

// starting prefixes the wait for a Gateway that an endpoint made wanted.
func (dm demand) starting() string {
	if dm.active {
		return Starting + " (a Service endpoint appeared): "
	}
	return ""
}
