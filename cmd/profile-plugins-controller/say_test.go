package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Each warning is one event per change: a waiting namespace is reconciled again and again with
// the same warnings, and a new warning next to them must not record the old ones again.
func TestEachWarningIsOneEventPerChange(t *testing.T) {
	t.Parallel()
	rec := events.NewFakeRecorder(100)
	r := &Reconciler{Recorder: rec}
	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "alice", UID: "u-1"}}
	result := func(warnings ...string) *runner.Result {
		return &runner.Result{Plugins: []runner.PluginResult{{Plugin: "pss", Warnings: warnings}}}
	}
	kept := "enforce level \"restricted\" set by gitops is kept, never loosened"
	r.say(profile, result(kept))
	r.say(profile, result(kept))
	assert.Len(t, drain(rec), 1, "the same warning again says nothing")

	r.say(profile, result(kept, "a pod runs outside every data plane"))
	got := drain(rec)
	if assert.Len(t, got, 1, "only the new warning: %v", got) {
		assert.Contains(t, got[0], "outside every data plane")
	}

	r.say(profile, result())
	r.say(profile, result(kept))
	assert.Len(t, drain(rec), 1, "a warning that went and came back is said again")
}
