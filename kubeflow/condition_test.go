package kubeflow_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// The condition says True with the notes when every plugin reached its state, False with the
// errors, waits and notes otherwise, under the type ProfilePluginsReady.
func TestConditionSaysWhetherEveryPluginReachedItsState(t *testing.T) {
	done := &runner.Result{Plugins: []runner.PluginResult{{Plugin: "waypoint", Notes: []string{"waypoint idle"}}}}
	assert.Equal(t, profilev1.ProfileCondition{Type: "ProfilePluginsReady", Status: "True", Message: "all plugins applied; waypoint: waypoint idle"},
		kubeflow.Condition(done))
	failed := &runner.Result{Errors: []error{errors.New("reading namespace")},
		Plugins: []runner.PluginResult{{Plugin: "authz", Waiting: []string{"waiting for the policy"}, Notes: []string{"a note"}}}}
	assert.Equal(t, profilev1.ProfileCondition{Type: "ProfilePluginsReady", Status: "False",
		Message: "reading namespace; authz: waiting for the policy; authz: a note"}, kubeflow.Condition(failed))
}
