package main

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	applies        *prometheus.CounterVec
	objectsChanged *prometheus.CounterVec
	waiting        prometheus.Gauge

	mu            sync.Mutex
	waitingByName map[string]bool
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
		waitingByName: map[string]bool{},
	}
	reg.MustRegister(m.applies, m.objectsChanged, m.waiting)
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
}

func (m *Metrics) forget(profile string) {
	if m != nil {
		m.setWaiting(profile, false)
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
