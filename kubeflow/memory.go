package kubeflow

import (
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// memory is what an Integration keeps of each Profile between calls, by UID and name (a Profile
// re-created under the same name starts afresh): the warnings and input errors it logged last,
// so that each is logged once per change, and how many Applies in a row waited only on a watched event, which
// spaces the fallback requeues. Revoke's end forgets the Profile.
type memory struct {
	mu       sync.Mutex
	profiles map[string]*memo
}

type memo struct {
	warned []string
	erred  string
	waits  int
}

func memoKey(profile client.Object) string { return string(profile.GetUID()) + "/" + profile.GetName() }

// newWarnings records warnings as the Profile's current ones and returns those it did not have
// in the previous call.
func (m *memory) newWarnings(profile client.Object, warnings []string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entry(profile)
	var fresh []string
	for _, w := range warnings {
		if !slices.Contains(e.warned, w) {
			fresh = append(fresh, w)
		}
	}
	e.warned = warnings
	return fresh
}

// newError records text as the Profile's current input errors and reports whether it differs
// from those of the previous call that had any.
func (m *memory) newError(profile client.Object, text string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entry(profile)
	fresh := e.erred != text
	e.erred = text
	return fresh
}

// waited counts one more Apply that waited only on a watched event, or ends the count, and
// returns the count.
func (m *memory) waited(profile client.Object, onWatch bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entry(profile)
	if !onWatch {
		e.waits = 0
		return 0
	}
	e.waits++
	return e.waits
}

func (m *memory) entry(profile client.Object) *memo {
	if m.profiles == nil {
		m.profiles = map[string]*memo{}
	}
	key := memoKey(profile)
	e, ok := m.profiles[key]
	if !ok {
		e = &memo{}
		m.profiles[key] = e
	}
	return e
}

func (m *memory) forget(profile client.Object) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.profiles, memoKey(profile))
}

// waitsOnWatch reports whether res waits, and only for the waypoint plugin's Gateway (made once
// its owner policy stands, routed once it is Programmed): objects a controller built as
// cmd/profile-plugins-controller is watches, so an event ends the wait and a requeue is only the
// fallback. Any other wait (pods to leave, kfam's grace period, a ConfigMap another writer holds)
// only a poll sees end.
func waitsOnWatch(res *runner.Result) bool {
	waits := false
	for _, p := range res.Plugins {
		for _, w := range p.Waiting {
			if p.Plugin != waypoint.PluginName || !strings.HasPrefix(w, waypoint.WaitingForWaypoint) {
				return false
			}
			waits = true
		}
	}
	return waits
}

// backedOff is the requeue of the n-th Apply in a row that waited only on a watched event: first
// after, then twice as long each time, up to limit.
func backedOff(after, limit time.Duration, n int) time.Duration {
	d := after
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
