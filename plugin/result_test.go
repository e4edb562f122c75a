package plugin_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// Any one kind of write counts as a change, on its own; objects found unchanged do not. Changed
// is what "no write when nothing changed" is checked against.
func TestResultChanged(t *testing.T) {
	ref := []plugin.Ref{{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Name: "x"}}
	key := []string{"k"}
	for name, tc := range map[string]struct {
		p    plugin.PluginResult
		want bool
	}{
		"nothing":        {plugin.PluginResult{}, false},
		"unchanged only": {plugin.PluginResult{Unchanged: ref}, false},
		"created":        {plugin.PluginResult{Created: ref}, true},
		"updated":        {plugin.PluginResult{Updated: ref}, true},
		"deleted":        {plugin.PluginResult{Deleted: ref}, true},
		"label set":      {plugin.PluginResult{LabelsSet: key}, true},
		"label removed":  {plugin.PluginResult{LabelsRemoved: key}, true},
	} {
		t.Run(name, func(t *testing.T) {
			quiet := plugin.PluginResult{Plugin: "quiet", Unchanged: ref}
			tc.p.Plugin = "p"
			r := &plugin.Result{Plugins: []plugin.PluginResult{quiet, tc.p}}
			assert.Equal(t, tc.want, r.Changed())
		})
	}
}

// The controller requeues after WaitRequeue only while a plugin waits.
func TestResultRequeueAfter(t *testing.T) {
	r := &plugin.Result{WaitRequeue: time.Minute, Plugins: []plugin.PluginResult{{Plugin: "p"}}}
	assert.Zero(t, r.RequeueAfter())
	r.Plugins[0].Waiting = []string{"the waypoint"}
	assert.Equal(t, time.Minute, r.RequeueAfter())
}
