package version

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
	"github.com/kubeflow-ambient/profile-plugins/internal/buildinfo"
)

func TestVersionOutputs(t *testing.T) {
	info := Info{Version: "v0.4.0", GoVersion: "go1.26.8"}
	var out bytes.Buffer
	require.NoError(t, run(nil, info, &out))
	assert.Equal(t, "profile-plugins v0.4.0\n", out.String())

	out.Reset()
	require.NoError(t, run([]string{"-o", "json"}, info, &out))
	var got Info
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	assert.Equal(t, info, got)

	out.Reset()
	require.NoError(t, run([]string{"--o", "yaml"}, info, &out))
	got = Info{}
	require.NoError(t, yaml.Unmarshal(out.Bytes(), &got))
	assert.Equal(t, info, got)

	var usage cli.UsageError
	assert.ErrorAs(t, run([]string{"-o", "xml"}, info, &out), &usage)
	assert.ErrorAs(t, run([]string{"extra"}, info, &out), &usage)
}

// The variable -ldflags -X sets is what Run prints.
func TestRunPrintsTheLinkerVersion(t *testing.T) {
	saved := buildinfo.Version
	t.Cleanup(func() { buildinfo.Version = saved })
	buildinfo.Version = "v9.9.9-test"
	var stdout, stderr bytes.Buffer
	assert.Equal(t, cli.ExitOK, Run(t.Context(), nil, &stdout, &stderr))
	assert.Equal(t, "profile-plugins v9.9.9-test\n", stdout.String())
	assert.Empty(t, stderr.String())
}
