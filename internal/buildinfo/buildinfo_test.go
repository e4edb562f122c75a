package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
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
			assert.Equal(t, c.want, Current(c.override, c.build, c.ok))
		})
	}
}

// Read reports the variable -ldflags -X sets.
func TestReadReportsTheLinkerVersion(t *testing.T) {
	saved := Version
	t.Cleanup(func() { Version = saved })
	Version = "v9.9.9-test"
	assert.Equal(t, "v9.9.9-test", Read().Version)
}
