package main

import (
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	applies        *prometheus.CounterVec
	objectsChanged *prometheus.CounterVec
	waiting        prometheus.Gauge
	waypoints      *prometheus.GaugeVec

	mu            sync.Mutex
	waitingByName map[string]bool
	waypointState map[string]string
}

// NewMetrics creates the metrics and registers them with reg (controller-runtime's
// metrics.Registry in a manager, which serves them on the metrics address).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "profile_plugins_applies_total",
			Help: "Plugin applies by plugin and result (ok, waiting, error).",
		}, []string{"plugin", "result"}),
		objectsChanged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "profile_plugins_objects_changed_total",
			Help: "Objects written by plugin and action (created, updated, deleted).",
		}, []string{"plugin", "action"}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "profile_plugins_waiting_for_waypoint",
			Help: "Profiles whose namespace waits for its waypoint to be Programmed.",
		}),
		waypoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "profile_plugins_waypoints",
			Help: "Profiles by the state of their waypoint: active (the plugins keep its Gateway, also inside mesh.waypoint.idleAfter) " +
				"or idle (provision onDemand, no Service endpoint, no Gateway).",
		}, []string{"state"}),
		waitingByName: map[string]bool{},
		waypointState: map[string]string{},
	}
	for _, s := range []string{waypointActive, waypointIdle} {
		m.waypoints.WithLabelValues(s).Set(0)
	}
	reg.MustRegister(m.applies, m.objectsChanged, m.waiting, m.waypoints)
	return m
}

func (m *Metrics) observe(profile string, res *runner.Result) {
	if m == nil {
		return
	}
	for _, p := range res.Plugins {
		result := "ok"
		switch {
		case len(p.Errors) > 0:
			result = "error"
		case len(p.Waiting) > 0:
			result = "waiting"
		}
		m.applies.WithLabelValues(p.Plugin, result).Inc()
		m.objectsChanged.WithLabelValues(p.Plugin, "created").Add(float64(len(p.Created)))
		m.objectsChanged.WithLabelValues(p.Plugin, "updated").Add(float64(len(p.Updated)))
		m.objectsChanged.WithLabelValues(p.Plugin, "deleted").Add(float64(len(p.Deleted)))
	}
	m.setWaiting(profile, waitingForWaypoint(res))
	m.setWaypoint(profile, waypointStateOf(res))
}

func (m *Metrics) forget(profile string) {
	if m != nil {
		m.setWaiting(profile, false)
		m.setWaypoint(profile, "")
	}
}

// The states of profile_plugins_waypoints.
const (
	waypointActive = "active"
	waypointIdle   = "idle"
)

// waypointStateOf is active when the call kept the waypoint Gateway, idle when the waypoint plugin
// says the namespace is idle and keeps none, "" otherwise (sidecar mode, a Gateway withheld).
func waypointStateOf(res *runner.Result) string {
	for _, p := range res.Plugins {
		if p.Plugin != waypoint.PluginName {
			continue
		}
		for _, ref := range slices.Concat(p.Created, p.Updated, p.Unchanged) {
			if ref.Kind == "Gateway" {
				return waypointActive
			}
		}
		for _, n := range slices.Concat(p.Notes, p.Waiting) {
			if strings.HasPrefix(n, waypoint.Idle) {
				return waypointIdle
			}
		}
	}
	return ""
}

func (m *Metrics) setWaypoint(profile, state string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if state == "" {
		delete(m.waypointState, profile)
	} else {
		m.waypointState[profile] = state
	}
	counts := map[string]int{}
	for _, s := range m.waypointState {
		counts[s]++
	}
	for _, s := range []string{waypointActive, waypointIdle} {
		m.waypoints.WithLabelValues(s).Set(float64(counts[s]))
	}
}

func (m *Metrics) setWaiting(profile string, waiting bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if waiting {
		m.waitingByName[profile] = true
	} else {
		delete(m.waitingByName, profile)
	}
	m.waiting.Set(float64(len(m.waitingByName)))
}
