package version

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
)

func TestCurrentVersion(t *testing.T) {
	tagged := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/kubeflow-ambient/profile-plugins", Version: "v0.4.0"}}
	cases := []struct {
		name     string
		override string
		build    *debug.BuildInfo
		ok       bool
		want     Info
	}{
		{"go install @version records the tag", "", tagged, true, Info{Version: "v0.4.0", GoVersion: "go1.26.8"}},
		{"-ldflags -X wins over the build info", "v0.5.0-rc.1", tagged, true, Info{Version: "v0.5.0-rc.1", GoVersion: "go1.26.8"}},
		{"a build without a module version", "", &debug.BuildInfo{GoVersion: "go1.26.8"}, true, Info{Version: "(devel)", GoVersion: "go1.26.8"}},
		{"no build info at all", "", nil, false, Info{Version: "(devel)"}},
		{"no build info, but -ldflags -X", "v1.0.0", nil, false, Info{Version: "v1.0.0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, current(c.override, c.build, c.ok))
		})
	}
}

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
	saved := Version
	t.Cleanup(func() { Version = saved })
	Version = "v9.9.9-test"
	var stdout, stderr bytes.Buffer
	assert.Equal(t, cli.ExitOK, Run(t.Context(), nil, &stdout, &stderr))
	assert.Equal(t, "profile-plugins v9.9.9-test\n", stdout.String())
	assert.Empty(t, stderr.String())
}
