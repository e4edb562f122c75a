package runner_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Any one kind of write counts as a change, on its own; objects found unchanged do not. Changed
// is what "no write when nothing changed" is checked against.
func TestResultChanged(t *testing.T) {
	t.Parallel()
	ref := []plugin.Ref{{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Name: "x"}}
	key := []string{"k"}
	for name, tc := range map[string]struct {
		p    runner.PluginResult
		want bool
	}{
		"nothing":        {runner.PluginResult{}, false},
		"unchanged only": {runner.PluginResult{Unchanged: ref}, false},
		"created":        {runner.PluginResult{Created: ref}, true},
		"updated":        {runner.PluginResult{Updated: ref}, true},
		"deleted":        {runner.PluginResult{Deleted: ref}, true},
		"label set":      {runner.PluginResult{LabelsSet: key}, true},
		"label removed":  {runner.PluginResult{LabelsRemoved: key}, true},
	} {
		t.Run(name, func(t *testing.T) {
			quiet := runner.PluginResult{Plugin: "quiet", Unchanged: ref}
			tc.p.Plugin = "p"
			r := &runner.Result{Plugins: []runner.PluginResult{quiet, tc.p}}
			assert.Equal(t, tc.want, r.Changed())
		})
	}
}

// The controller requeues after WaitRequeue only while a plugin waits.
func TestResultRequeueAfter(t *testing.T) {
	t.Parallel()
	r := &runner.Result{WaitRequeue: time.Minute, Plugins: []runner.PluginResult{{Plugin: "p"}}}
	assert.Zero(t, r.RequeueAfter())
	r.Plugins[0].Waiting = []string{"the waypoint"}
	assert.Equal(t, time.Minute, r.RequeueAfter())
}

// Notes read in the condition whether it is True or False, and ask for no requeue; a plugin's own
// deadline does, no later than it.
func TestNotesAndDeadlinesInTheResult(t *testing.T) {
	t.Parallel()
	idle := runner.Result{WaitRequeue: time.Minute, Plugins: []runner.PluginResult{
		{Plugin: "waypoint", Notes: []string{"waypoint idle since 2026-12-01T09:00:00Z: ..."}, RequeueAfter: 20 * time.Minute},
		{Plugin: "pss"},
	}}
	ready, msg := idle.Summary()
	assert.True(t, ready)
	assert.Equal(t, "all plugins applied; waypoint: waypoint idle since 2026-12-01T09:00:00Z: ...", msg)
	assert.Equal(t, 20*time.Minute, idle.RequeueAfter(), "the deadline, with nothing waiting")
	assert.Equal(t, []string{"waypoint: waypoint idle since 2026-12-01T09:00:00Z: ..."}, idle.Notes())

	idle.Plugins[1].Waiting = []string{"w"}
	ready, msg = idle.Summary()
	assert.False(t, ready)
	assert.Equal(t, "pss: w; waypoint: waypoint idle since 2026-12-01T09:00:00Z: ...", msg)
	assert.Equal(t, time.Minute, idle.RequeueAfter(), "the wait comes sooner than the deadline")

	noted := runner.Result{Plugins: []runner.PluginResult{{Plugin: "waypoint", Notes: []string{"n"}}}}
	assert.Zero(t, noted.RequeueAfter(), "a note alone asks for no requeue")
}
