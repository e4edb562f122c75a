package kubeflow_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// logged is a context whose logger writes each line into lines.
func logged(lines *[]string) context.Context {
	logger := funcr.New(func(prefix, args string) { *lines = append(*lines, prefix+" "+args) }, funcr.Options{})
	return log.IntoContext(context.Background(), logger)
}

func containing(lines []string, s string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// OnResult receives the Result of every Apply and every Revoke, for the profile it was for.
func TestOnResultSeesEveryApplyAndRevoke(t *testing.T) {
	in, _ := newIntegrationFor(t, sidecarConfig(t))
	var seen []string
	in.OnResult = func(profile client.Object, res *runner.Result) {
		require.NotNil(t, res)
		seen = append(seen, profile.GetName())
	}
	ctx := context.Background()
	_, err := in.Apply(ctx, aliceProfile("alice@example.com"))
	require.NoError(t, err)
	_, err = in.Revoke(ctx, aliceProfile("alice@example.com"))
	require.NoError(t, err)
	assert.Equal(t, []string{"alice", "alice"}, seen)
}

// A Revoke the runner reports no error for logs none: the log of input errors that do not hold
// the finalizer is for those errors only.
func TestRevokeWithoutErrorsLogsNoInputErrors(t *testing.T) {
	in, _ := newIntegrationFor(t, sidecarConfig(t))
	ctx := context.Background()
	_, err := in.Apply(ctx, aliceProfile("alice@example.com"))
	require.NoError(t, err)

	var lines []string
	res, err := in.Revoke(logged(&lines), aliceProfile("alice@example.com"))
	require.NoError(t, err)
	assert.Zero(t, res)
	assert.Empty(t, containing(lines, "revoke reported input errors"), "%v", lines)
}

// An Apply that changes the namespace logs what it did.
func TestApplyLogsWhatItChanged(t *testing.T) {
	in, _ := newIntegrationFor(t, sidecarConfig(t))
	var lines []string
	_, err := in.Apply(logged(&lines), aliceProfile("alice@example.com"))
	require.NoError(t, err)
	assert.Len(t, containing(lines, "plugins applied"), 1, "%v", lines)

	lines = nil
	_, err = in.Apply(logged(&lines), aliceProfile("alice@example.com"))
	require.NoError(t, err)
	assert.Empty(t, containing(lines, "plugins applied"), "the second Apply changes nothing")
}

// An input error that a requeue hides from controller-runtime (the plugins wait) is logged by
// Apply, with the profile; one returned as a terminal error is controller-runtime's to log, and a
// clean Apply logs none.
func TestApplyLogsTheInputErrorsItReturnsNoErrorFor(t *testing.T) {
	in, _ := newIntegration(t)
	var lines []string
	res, err := in.Apply(logged(&lines), aliceProfile("alice@example.com "))
	require.NoError(t, err)
	require.Positive(t, res.RequeueAfter, "the waypoint is not Programmed")
	got := containing(lines, "input errors; requeued for a wait or a deadline of the plugins")
	require.Len(t, got, 1, "%v", lines)
	assert.Contains(t, got[0], "spec.owner.name")
	assert.Contains(t, got[0], `"profile"="alice"`)

	in, _ = newIntegrationFor(t, sidecarConfig(t))
	for _, owner := range []string{"alice@example.com ", "alice@example.com"} {
		lines = nil
		_, _ = in.Apply(logged(&lines), aliceProfile(owner))
		assert.Empty(t, containing(lines, "input errors; requeued"), "owner %q: %v", owner, lines)
	}
}

// A waiting namespace comes back with the same input error on every requeue: it is logged once
// per change, not on every pass.
func TestAnInputErrorWhileWaitingIsLoggedOncePerChange(t *testing.T) {
	in, _ := newIntegration(t)
	var lines []string
	for range 3 {
		_, err := in.Apply(logged(&lines), aliceProfile("alice@example.com "))
		require.NoError(t, err)
	}
	assert.Len(t, containing(lines, "input errors; requeued"), 1, "%v", lines)
	_, err := in.Apply(logged(&lines), aliceProfile("alice@example.com  "))
	require.NoError(t, err)
	assert.Len(t, containing(lines, "input errors; requeued"), 2, "a changed error is logged again")
}
