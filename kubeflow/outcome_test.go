package kubeflow

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// One mapping serves Apply and Revoke: they differ only in an input error, terminal for Apply and
// done for Revoke (it must not hold the finalizer). A wait always comes back, errors or not.
func TestOutcomeOfApplyAndRevoke(t *testing.T) {
	conflict := func() []runner.PluginResult {
		return []runner.PluginResult{{Plugin: "a", Errors: []error{&runner.ConflictError{Plugin: "a"}}}}
	}
	type want struct {
		res      ctrl.Result
		err      bool
		terminal bool
	}
	for _, tc := range []struct {
		name          string
		res           runner.Result
		apply, revoke want
	}{
		{name: "done", res: runner.Result{Plugins: []runner.PluginResult{{Plugin: "a"}}}},
		{
			name:   "waiting",
			res:    runner.Result{WaitRequeue: 7, Plugins: []runner.PluginResult{{Plugin: "a", Waiting: []string{"w"}}}},
			apply:  want{res: ctrl.Result{RequeueAfter: 7}},
			revoke: want{res: ctrl.Result{RequeueAfter: 7}},
		},
		{
			name:   "waiting without a delay still comes back",
			res:    runner.Result{Plugins: []runner.PluginResult{{Plugin: "a", Waiting: []string{"w"}}}},
			apply:  want{res: ctrl.Result{RequeueAfter: runner.DefaultWaitRequeue}},
			revoke: want{res: ctrl.Result{RequeueAfter: runner.DefaultWaitRequeue}},
		},
		{
			name:  "conflict",
			res:   runner.Result{Plugins: conflict()},
			apply: want{err: true, terminal: true},
		},
		{
			name: "conflict while waiting keeps the wait",
			res: runner.Result{WaitRequeue: 7, Plugins: append(conflict(),
				runner.PluginResult{Plugin: "b", Waiting: []string{"w"}})},
			apply:  want{res: ctrl.Result{RequeueAfter: 7}},
			revoke: want{res: ctrl.Result{RequeueAfter: 7}},
		},
		{
			name:  "an idle waypoint's deadline comes back for Apply only",
			res:   runner.Result{Plugins: []runner.PluginResult{{Plugin: "a", RequeueAfter: 20 * time.Minute}, {Plugin: "b", RequeueAfter: 0}}},
			apply: want{res: ctrl.Result{RequeueAfter: 20 * time.Minute}},
			// revoke: any RequeueAfter would hold the finalizer
		},
		{
			// A refused Profile entry (an input error) changes no deadline: the idle waypoint
			// still goes at idleAfter, and the error is in the condition (AfterApply).
			name:  "an input error keeps the deadline for Apply",
			res:   runner.Result{Plugins: append(conflict(), runner.PluginResult{Plugin: "b", RequeueAfter: 20 * time.Minute})},
			apply: want{res: ctrl.Result{RequeueAfter: 20 * time.Minute}},
		},
		{
			name: "a wait sooner than the deadline wins",
			res: runner.Result{WaitRequeue: 7, Plugins: []runner.PluginResult{{Plugin: "a", RequeueAfter: time.Hour},
				{Plugin: "b", Waiting: []string{"w"}}}},
			apply:  want{res: ctrl.Result{RequeueAfter: 7}},
			revoke: want{res: ctrl.Result{RequeueAfter: 7}},
		},
		{
			name: "a deadline sooner than the wait wins",
			res: runner.Result{WaitRequeue: time.Minute, Plugins: []runner.PluginResult{{Plugin: "a", RequeueAfter: time.Second},
				{Plugin: "b", Waiting: []string{"w"}}}},
			apply:  want{res: ctrl.Result{RequeueAfter: time.Second}},
			revoke: want{res: ctrl.Result{RequeueAfter: time.Second}},
		},
		{
			name:   "api error",
			res:    runner.Result{Errors: []error{errors.New("timeout")}},
			apply:  want{err: true},
			revoke: want{err: true},
		},
		{
			name:   "api and input error",
			res:    runner.Result{Errors: []error{errors.New("timeout")}, Plugins: conflict()},
			apply:  want{err: true},
			revoke: want{err: true},
		},
		{
			name: "api error while waiting",
			res: runner.Result{WaitRequeue: time.Minute, Errors: []error{errors.New("timeout")},
				Plugins: []runner.PluginResult{{Plugin: "a", Waiting: []string{"w"}}}},
			apply:  want{err: true},
			revoke: want{err: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, op := range []struct {
				name string
				want want
				got  func() (ctrl.Result, error)
			}{
				{"apply", tc.apply, func() (ctrl.Result, error) { return Outcome(&tc.res) }},
				{"revoke", tc.revoke, func() (ctrl.Result, error) { return outcome(&tc.res, false) }},
			} {
				got, err := op.got()
				assert.Equal(t, op.want.res, got, op.name)
				assert.Equal(t, op.want.err, err != nil, "%s error: %v", op.name, err)
				assert.Equal(t, op.want.terminal, errors.Is(err, reconcile.TerminalError(nil)), "%s terminal: %v", op.name, err)
			}
		})
	}
}
