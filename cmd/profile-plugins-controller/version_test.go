package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeflow-ambient/profile-plugins/internal/buildinfo"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
)

// versionFlag is the linker flag of a release build (the Makefile's LDFLAGS).
const versionFlag = "-X github.com/kubeflow-ambient/profile-plugins/internal/buildinfo.Version="

// A release build of both programs, stamped as the Makefile stamps it, reports that version:
// `profile-plugins version` and `profile-plugins-controller -version`.
func TestReleaseBuildStampsTheVersionIntoBothPrograms(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds both programs")
	}
	root, dir := golden.ModuleRoot(t), t.TempDir()
	const v = "v0.0.0-stamp-test"
	for _, c := range []struct{ pkg, bin string }{
		{"./cmd/profile-plugins", "profile-plugins"},
		{"./cmd/profile-plugins-controller", "profile-plugins-controller"},
	} {
		cmd := exec.Command("go", "build", "-ldflags", versionFlag+v, "-o", filepath.Join(dir, c.bin), c.pkg)
		cmd.Dir = root
		cmd.Env = os.Environ()
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	out, err := exec.Command(filepath.Join(dir, "profile-plugins"), "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "profile-plugins "+v, strings.TrimSpace(string(out)))
	out, err = exec.Command(filepath.Join(dir, "profile-plugins-controller"), "-version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "profile-plugins-controller "+v, strings.TrimSpace(string(out)))
}

// The start log names the version and the Go release.
func TestStartLogNamesTheVersion(t *testing.T) {
	t.Parallel()
	kv := versionLog(buildinfo.Info{Version: "v1.2.3", GoVersion: "go1.26.8"})
	assert.Equal(t, []any{"version", "v1.2.3", "goVersion", "go1.26.8"}, kv)
}
