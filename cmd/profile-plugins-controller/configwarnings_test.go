package main

import (
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// What the configuration allows but warns about is logged at start, one line a warning: a very
// wide ipBlocks range is otherwise said nowhere by the controller.
func TestConfigWarningsAreLoggedAtStart(t *testing.T) {
	t.Parallel()
	logs := &logLines{}
	logger := funcr.New(func(prefix, args string) { logs.lines = append(logs.lines, prefix+" "+args) }, funcr.Options{})

	logConfigWarnings(logger, config.Default())
	assert.Empty(t, logs.lines, "the defaults warn about nothing")

	cfg := config.Default()
	cfg.Authorization.L4Exceptions = []config.L4Exception{{IPBlocks: []string{"10.0.0.0/8", "10.8.3.4", "fd00::/32"}, Ports: []int32{9091}}}
	require.NoError(t, cfg.Validate())
	logConfigWarnings(logger, cfg)
	require.Len(t, logs.lines, 2, "%q", logs.lines)
	assert.True(t, logs.has(`"msg"="configuration warning"`, `authorization.l4Exceptions[0].ipBlocks[0]: \"10.0.0.0/8\" is a very wide range`), "%q", logs.lines)
	assert.True(t, logs.has(`"msg"="configuration warning"`, `authorization.l4Exceptions[0].ipBlocks[2]: \"fd00::/32\" is a very wide range`), "%q", logs.lines)
}
